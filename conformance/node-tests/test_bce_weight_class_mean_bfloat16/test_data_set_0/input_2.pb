BweightJ
à>?¿>"?ë=