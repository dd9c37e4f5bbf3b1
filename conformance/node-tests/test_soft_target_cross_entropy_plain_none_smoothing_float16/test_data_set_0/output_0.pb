
BoutputJpCPAÐ>“?