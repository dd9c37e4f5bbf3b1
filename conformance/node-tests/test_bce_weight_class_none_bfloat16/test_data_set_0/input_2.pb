BweightJ
V?G?®>>ê>