/* the floor */
int low(void);
