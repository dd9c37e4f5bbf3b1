
BoutputJ
<}4+¥…"^5