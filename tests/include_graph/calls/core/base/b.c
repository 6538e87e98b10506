int a(int n);
int b(int n) { return n > 0 ? a(n - 1) : 1; }
