BweightJ @+Ύ=θ?(dhαbmΘ?όπQέ
Ρ?6ό8ε'α?