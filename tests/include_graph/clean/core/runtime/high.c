#include <ganflow/high.h>
#include "../base/low.h"
int high(void) { return low() + 1; }
