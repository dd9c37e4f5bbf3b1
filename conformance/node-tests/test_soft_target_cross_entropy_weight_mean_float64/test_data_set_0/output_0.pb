BoutputJÝ¦M
ý?