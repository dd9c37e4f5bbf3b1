
Bgrad_outputJ´Ù»Š±(½L%Ù¨ß´1¼W¶^¼l½13