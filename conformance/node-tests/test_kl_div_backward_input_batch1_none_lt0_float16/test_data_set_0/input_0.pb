
Bgrad_outputJ(­¾l4›9·N¼°&ÀªŸ=û942r<”²h»¬8©8à²CºU3ýÀ…9