int stray(void) { return 0; }
