
BweightJ/<
>ë>