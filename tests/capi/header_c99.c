/* Compiled with -std=c99 -pedantic -Wall -Wextra -Werror: kx.h must be plain C99. */
#include <kx/kx.h>

int kx_header_is_c99(void) { return KX_OK; }
