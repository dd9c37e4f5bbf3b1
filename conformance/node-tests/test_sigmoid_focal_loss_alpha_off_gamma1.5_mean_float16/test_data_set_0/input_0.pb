
BinputJ0{Eû»¿AØ2ÈC°<{E.2æ˜>/=HºÔπQ@:@ÌΩjºl≈
EbπD=’EùD