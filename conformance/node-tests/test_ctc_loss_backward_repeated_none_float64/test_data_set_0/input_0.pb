Bgrad_outputJ ¥ËØoß?b%ÄTº
¼?"õƒ½×ä?,6X`Ö?