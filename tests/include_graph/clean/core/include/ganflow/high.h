/* public */
int high(void);
