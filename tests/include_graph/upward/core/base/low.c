#include "../runtime/high.h"
int low(void) { return high(); }
