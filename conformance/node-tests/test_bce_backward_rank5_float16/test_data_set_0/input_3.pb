
BweightJ¥?ó?X>