/* no_desc: a shared object that is not a ganflow stage (it exports no
 * `ganflow_stage` descriptor), for the loader's tests. Built outside the
 * stage directory, never installed. */
__attribute__((visibility("default"))) int not_a_stage(int x);

int not_a_stage(int x)
{
	return x + 1;
}
