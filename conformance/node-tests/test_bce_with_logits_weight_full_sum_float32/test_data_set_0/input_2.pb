BweightJP<£?}u>¬¥7?æx>kZ	>]<=3>âfD>w	?’îæ>>u?CCt?rêK?+í+?oSX?
Rp?ÑH¹<'áñ=‚t¸>wª¿=