
BweightJ~:D9ã82