BweightJ
,=˜>m?I?R<