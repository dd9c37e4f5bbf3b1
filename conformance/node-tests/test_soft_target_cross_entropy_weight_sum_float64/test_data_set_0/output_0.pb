BoutputJÝ¦M
@