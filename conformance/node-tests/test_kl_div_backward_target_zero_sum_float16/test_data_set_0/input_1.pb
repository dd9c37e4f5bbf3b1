
BinputJ#9€¶]º·q7ëª