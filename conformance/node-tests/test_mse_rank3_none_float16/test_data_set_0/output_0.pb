
BoutputJ<@5@Ìh/c4õIgCßFfFã4 =‹5=ò9İ=Y=>>¸K0 AûAG¤E9S<:BT2{?4