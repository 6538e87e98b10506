int high(void);
