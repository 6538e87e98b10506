/* calls b() through a declaration of its own: no include edge */
int b(int n);
int a(int n) { return n > 0 ? b(n - 1) : 0; }
