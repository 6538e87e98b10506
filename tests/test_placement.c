/* Tests of placement (core/dist/placement.h) without Lua: stages compiled in
 * here are declared on ranks of a pretend world, as each rank of a
 * distributed run would declare them. An edge between two ranks gets a
 * transport_send stage on the producing rank and a transport_recv stage on
 * the consuming one, named by the edge's tag, carrying the producer's kind
 * and the pace its kind calls for (or the one asked for); an edge inside
 * one rank is a plain ring; a rank holding neither end gets nothing; every
 * rank agrees on the same declarations; errors name what is wrong. The
 * transport stages are the real ones (loaded, parameters checked, never
 * run), so no MPI is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/graph.h>

#include "../core/dist/placement.h"

/* ---- stages compiled in ---- */

static int nop_create(gf_ctx *ctx, const gf_value *params, void **self)
{
	(void)ctx;
	(void)params;
	*self = NULL;
	return 0;
}

static int nop_run(void *self, gf_ctx *ctx)
{
	(void)self;
	(void)ctx;
	return 0;
}

static const gf_port_desc src_out[] = {
	{ "out", "items", 0, "" },
	{ "books", "metrics", GF_PORT_OPTIONAL, "" },
};
static const gf_port_desc sink_in[] = {
	{ "inp", "items", 0, "" },
	{ "books", "metrics", GF_PORT_OPTIONAL, "" },
};

static const gf_stage_desc src = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "src", .doc = "",
	.outputs = src_out, .noutputs = 2, .create = nop_create, .run = nop_run,
};
static const gf_stage_desc sink = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "sink", .doc = "",
	.inputs = sink_in, .ninputs = 2, .create = nop_create, .run = nop_run,
};

/* ---- helpers ---- */

static gf_placement *make(int rank, int world)
{
	gf_placement *p = NULL;
	assert_int_equal(gf_placement_create(&p, rank, world), 0);
	return p;
}

/* Declares a stage; fails the test on error. */
static int add(gf_placement *p, const gf_stage_desc *d, int rank)
{
	int id = -1;
	if (gf_placement_add_desc(p, d, NULL, NULL, 1, rank, &id))
		fail_msg("add %s on rank %d: %s", d->name, rank, gf_placement_error(p));
	return id;
}

static void link_(gf_placement *p, int a, const char *out, int b, const char *in, const gf_place_opts *o)
{
	if (gf_placement_connect(p, a, out, b, in, o))
		fail_msg("connect: %s", gf_placement_error(p));
}

/* Node of this rank's graph named name, or -1. */
static int node_named(gf_placement *p, const char *name)
{
	gf_graph *g = gf_placement_graph(p);
	for (int i = 0; i < gf_graph_nodes(g); i++)
		if (!strcmp(gf_graph_node_name(g, i), name))
			return i;
	return -1;
}

static void expect_error(gf_placement *p, int rc, const char *text)
{
	assert_int_not_equal(rc, 0);
	if (!strstr(gf_placement_error(p), text))
		fail_msg("error \"%s\" lacks \"%s\"", gf_placement_error(p), text);
}

/* src on rank 0 -> sink on rank 1, as rank `rank` of `world` declares it. */
static gf_placement *two_ranks(int rank, int world, const gf_place_opts *o)
{
	gf_placement *p = make(rank, world);
	int a = add(p, &src, 0), b = add(p, &sink, 1);
	link_(p, a, "out", b, "inp", o);
	return p;
}

/* ---- edges between ranks ---- */

static void test_sender_side(void **state)
{
	(void)state;
	gf_placement *p = two_ranks(0, 2, NULL);
	/* rank 0 runs src and the sending end of edge 1, joined by a ring */
	assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), 2);
	assert_int_equal(node_named(p, "src"), 0);
	assert_int_equal(node_named(p, "sink"), -1);
	assert_int_equal(gf_placement_xedges(p), 1);
	const gf_place_xedge *x = gf_placement_xedge(p, 0);
	assert_non_null(x);
	assert_int_equal(x->tag, 1);
	assert_int_equal(x->from_rank, 0);
	assert_int_equal(x->to_rank, 1);
	assert_int_equal(x->node, node_named(p, "_tx1"));
	assert_int_equal(x->node, 1);
	assert_string_equal(x->kind, "items");
	assert_string_equal(x->latency, "low");
	assert_string_equal(x->transport, "mpi");
	assert_null(gf_placement_xedge(p, 1));
	/* the whole pipeline and this rank's part are complete */
	assert_int_equal(gf_placement_validate(p), 0);
	assert_string_equal(gf_placement_agreement(p), "stage src src rank=0\n"
	                                               "stage sink sink rank=1\n"
	                                               "edge 1 src.out -> sink.inp rank 0 -> 1 mpi\n");
	/* one process: nothing to compare */
	assert_int_equal(gf_placement_check_ranks(p), 0);
	gf_placement_destroy(p);
}

static void test_receiver_side(void **state)
{
	(void)state;
	gf_placement *p = two_ranks(1, 2, NULL);
	/* rank 1 runs the receiving end of edge 1 feeding sink */
	assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), 2);
	assert_int_equal(node_named(p, "sink"), 0);
	assert_int_equal(node_named(p, "src"), -1);
	assert_int_equal(node_named(p, "_tx1"), -1);
	const gf_place_xedge *x = gf_placement_xedge(p, 0);
	assert_non_null(x);
	assert_int_equal(x->node, node_named(p, "_rx1"));
	assert_int_equal(x->node, 1);
	assert_string_equal(x->kind, "items");
	assert_string_equal(x->latency, "low");
	assert_int_equal(gf_placement_validate(p), 0);
	/* every rank describes the pipeline alike */
	gf_placement *p0 = two_ranks(0, 2, NULL);
	assert_string_equal(gf_placement_agreement(p), gf_placement_agreement(p0));
	gf_placement_destroy(p0);
	gf_placement_destroy(p);
}

static void test_rank_without_either_end(void **state)
{
	(void)state;
	gf_placement *p = two_ranks(2, 3, NULL);
	assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), 0);
	assert_int_equal(gf_graph_nodes(gf_placement_shadow(p)), 2);
	assert_int_equal(gf_placement_stages(p), 2);
	/* the edge still counts (tags are alike on every rank) */
	assert_int_equal(gf_placement_xedges(p), 1);
	assert_int_equal(gf_placement_xedge(p, 0)->node, -1);
	assert_int_equal(gf_placement_validate(p), 0);
	gf_placement_destroy(p);
}

static void test_pace_by_kind(void **state)
{
	(void)state;
	assert_string_equal(gf_placement_latency("metrics"), "relaxed");
	assert_string_equal(gf_placement_latency("state"), "relaxed");
	assert_string_equal(gf_placement_latency("fakes"), "low");
	assert_string_equal(gf_placement_latency("items"), "low");

	/* the books wait at the relaxed pace; an edge may ask for another */
	gf_placement *p = make(1, 2);
	int a = add(p, &src, 0), b = add(p, &sink, 1);
	gf_place_opts low = { .latency = "low" };
	link_(p, a, "books", b, "books", NULL);
	link_(p, a, "out", b, "inp", &low);
	assert_int_equal(gf_placement_xedges(p), 2);
	const gf_place_xedge *books = gf_placement_xedge(p, 0), *data = gf_placement_xedge(p, 1);
	assert_int_equal(books->tag, 1);
	assert_string_equal(books->kind, "metrics");
	assert_string_equal(books->latency, "relaxed");
	assert_int_equal(books->node, node_named(p, "_rx1"));
	assert_int_equal(data->tag, 2);
	assert_string_equal(data->latency, "low");
	assert_int_equal(data->node, node_named(p, "_rx2"));
	gf_placement_destroy(p);

	/* and a data edge may ask for the relaxed pace */
	gf_place_opts relaxed = { .latency = "relaxed", .transport = "tcp", .address = "127.0.0.1:5000", .timeout = 5 };
	p = two_ranks(0, 2, &relaxed);
	assert_string_equal(gf_placement_xedge(p, 0)->latency, "relaxed");
	assert_string_equal(gf_placement_xedge(p, 0)->transport, "tcp");
	assert_non_null(strstr(gf_placement_agreement(p), "edge 1 src.out -> sink.inp rank 0 -> 1 tcp\n"));
	gf_placement_destroy(p);
}

/* ---- edges inside one rank ---- */

static void test_edge_within_one_rank(void **state)
{
	(void)state;
	/* both on rank 1: a ring there, nothing on rank 0, no transport */
	for (int rank = 0; rank < 2; rank++) {
		gf_placement *p = make(rank, 2);
		int a = add(p, &src, 1), b = add(p, &sink, 1);
		link_(p, a, "out", b, "inp", NULL);
		assert_int_equal(gf_placement_xedges(p), 0);
		assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), rank == 1 ? 2 : 0);
		assert_int_equal(node_named(p, "_tx1"), -1);
		assert_int_equal(node_named(p, "_rx1"), -1);
		assert_int_equal(gf_placement_validate(p), 0);
		assert_null(strstr(gf_placement_agreement(p), "edge"));
		gf_placement_destroy(p);
	}
	/* a stage on every rank feeding one on rank 1: the replica beside the
	 * consumer speaks for all, the others' output stays unconnected */
	gf_placement *p = make(0, 2);
	int a = add(p, &src, -1), b = add(p, &sink, 1);
	link_(p, a, "out", b, "inp", NULL);
	assert_int_equal(gf_placement_xedges(p), 0);
	assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), 1);
	expect_error(p, gf_placement_validate(p), "rank 0: output 'src.out' of stage 'src' (src) is not connected");
	gf_placement_destroy(p);
	p = make(1, 2);
	a = add(p, &src, -1);
	b = add(p, &sink, 1);
	link_(p, a, "out", b, "inp", NULL);
	assert_int_equal(gf_graph_nodes(gf_placement_graph(p)), 2);
	assert_int_equal(gf_placement_validate(p), 0);
	/* the graph to run is the caller's once taken */
	gf_graph *g = gf_placement_take_graph(p);
	assert_non_null(g);
	assert_null(gf_placement_graph(p));
	gf_graph_destroy(g);
	gf_placement_destroy(p);
}

/* ---- errors ---- */

static void test_errors(void **state)
{
	(void)state;
	gf_placement *p = make(0, 2);
	int id = -1;
	expect_error(p, gf_placement_add_desc(p, &src, NULL, NULL, 1, 2, &id),
	             "gf.stage \"src\": rank = 2, but the run has 2 ranks (start it with mpirun -np 3, "
	             "or place the stage with rank = r % gf.world())");
	expect_error(p, gf_placement_add_desc(p, &src, NULL, NULL, 1, -2, &id), "gf.stage \"src\": rank must be >= 0, not -2");
	assert_int_equal(gf_placement_stages(p), 0);
	expect_error(p, gf_placement_add(p, "no_such_stage", NULL, NULL, 1, 0, &id), "unknown stage 'no_such_stage'");
	int a = add(p, &src, 0), b = add(p, &sink, 1);
	/* the whole pipeline's rules hold on every rank */
	expect_error(p, gf_placement_connect(p, a, "nope", b, "inp", NULL), "stage 'src' (src) has no output port 'nope'");
	expect_error(p, gf_placement_connect(p, a, "books", b, "inp", NULL), "sends \"metrics\" messages");
	gf_place_opts tcp = { .transport = "tcp" };
	expect_error(p, gf_placement_connect(p, a, "out", b, "inp", &tcp),
	             "gf.connect(src.out, sink.inp): transport = \"tcp\" needs address = \"host:port\" (where rank 1 listens)");
	assert_int_equal(gf_placement_xedges(p), 0);
	gf_placement_destroy(p);
	/* an input left unconnected is the whole pipeline's error, on every rank */
	p = make(0, 2);
	add(p, &src, 0);
	add(p, &sink, 1);
	expect_error(p, gf_placement_validate(p), "input 'sink.inp' of stage 'sink' (sink) is not connected");
	gf_placement_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sender_side),
		cmocka_unit_test(test_receiver_side),
		cmocka_unit_test(test_rank_without_either_end),
		cmocka_unit_test(test_pace_by_kind),
		cmocka_unit_test(test_edge_within_one_rank),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
