BoutputJyUt
‹¿yUt
{?yUt
«¿