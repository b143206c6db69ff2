/*
 * cfdio: CFD-like proxy measuring what result-file output costs a run.
 *
 * 3-D structured grid, 7-point stencil sweeps with halo exchange on a
 * Cartesian communicator; every N steps the field is written in one of the
 * strategies none | per-rank-then-gather | gather-to-root | mpiio.  The global
 * file layout is identical for all strategies: the global grid as raw native
 * doubles, row-major, last dimension fastest.
 *
 * --mode triad runs a STREAM-triad-like kernel (a = b + s*c) instead;
 * --mode stencil --with-triad runs it after the stencil, with the same ranks, and
 * reports the stencil's bandwidth as a fraction of it.
 * --mode read is the post-processing read: every rank writes a result file of
 * --read-mb MiB (fsync), drops it from the page cache (posix_fadvise DONTNEED,
 * checked with mincore), then all ranks read their files back at once; per-reader
 * and aggregate read bandwidth, files verified and removed.
 *
 * One result line on rank 0:  CFDIO key=value ...
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* mincore */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum strategy { S_NONE, S_PERRANK, S_GATHER, S_MPIIO };
static const char *strategy_names[] = {"none", "per-rank-then-gather", "gather-to-root",
                                       "mpiio"};

static int rank, nranks;
static MPI_Comm cart;
static int dims[3], coords[3];
static int gsize[3], lsize[3], lstart[3];

static void die(const char *msg)
{
    fprintf(stderr, "cfdio: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: cfdio [--mode stencil|triad|read] [--local NX NY NZ | --global NX NY NZ]\n"
                "             [--steps N] [--every N] [--strategy none|per-rank-then-gather|"
                "gather-to-root|mpiio]\n"
                "             [--dir DIR] [--keep] [--with-triad] [--triad-n N] [--reps N]\n"
                "             [--read-mb N] [--mpiio-hint KEY=VALUE]...\n");
}

/* order-independent, position-sensitive checksum of one element */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static uint64_t elem_sum(double v, uint64_t gidx)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return mix(bits ^ (gidx * UINT64_C(0x9e3779b97f4a7c15)));
}

static void block_of(int r, int start[3], int size[3])
{
    int c[3];
    MPI_Cart_coords(cart, r, 3, c);
    for (int d = 0; d < 3; d++) {
        int base = gsize[d] / dims[d], rem = gsize[d] % dims[d];
        size[d] = base + (c[d] < rem);
        start[d] = c[d] * base + (c[d] < rem ? c[d] : rem);
    }
}

#define IDX(i, j, k) (((size_t)(i) * (lsize[1] + 2) + (j)) * (lsize[2] + 2) + (k))

static void pack(const double *u, double *buf)
{
    size_t n = 0;
    for (int i = 1; i <= lsize[0]; i++)
        for (int j = 1; j <= lsize[1]; j++)
            for (int k = 1; k <= lsize[2]; k++)
                buf[n++] = u[IDX(i, j, k)];
}

/* place a packed block into the global array */
static void place(double *global, const double *blk, const int st[3], const int sz[3])
{
    size_t n = 0;
    for (int i = 0; i < sz[0]; i++)
        for (int j = 0; j < sz[1]; j++) {
            size_t off = ((size_t)(st[0] + i) * gsize[1] + st[1] + j) * gsize[2] + st[2];
            memcpy(global + off, blk + n, (size_t)sz[2] * sizeof(double));
            n += (size_t)sz[2];
        }
}

static uint64_t field_checksum(const double *u)
{
    uint64_t s = 0;
    for (int i = 1; i <= lsize[0]; i++)
        for (int j = 1; j <= lsize[1]; j++)
            for (int k = 1; k <= lsize[2]; k++) {
                uint64_t g = ((uint64_t)(lstart[0] + i - 1) * gsize[1] + lstart[1] + j - 1) *
                                 gsize[2] + lstart[2] + k - 1;
                s += elem_sum(u[IDX(i, j, k)], g);
            }
    uint64_t tot = 0;
    MPI_Allreduce(&s, &tot, 1, MPI_UINT64_T, MPI_SUM, cart);
    return tot;
}

/* ---- checked POSIX I/O: on failure, print path + errno, return -1 ---- */
static int write_all(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "cfdio: rank %d: cannot create %s: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        return -1;
    }
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "cfdio: rank %d: write to %s failed: %s (errno %d)\n", rank, path,
                    strerror(errno), errno);
            close(fd);
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        fprintf(stderr, "cfdio: rank %d: fsync of %s failed: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        close(fd);
        return -1;
    }
    if (close(fd) != 0) {
        fprintf(stderr, "cfdio: rank %d: close of %s failed: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        return -1;
    }
    return 0;
}

static int read_all(const char *path, void *data, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "cfdio: rank %d: cannot open %s: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        return -1;
    }
    char *p = data;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "cfdio: rank %d: read of %s failed: %s\n", rank, path,
                    r == 0 ? "short file" : strerror(errno));
            close(fd);
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    close(fd);
    return 0;
}

static int all_ok(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, cart);
    return all;
}

static int all_ok_world(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/*
 * Buffers and datatypes of the output paths, made once and reused by every output,
 * so that no output pays for page faults of fresh memory:
 *   interior   the rank's block inside its padded field (sends and MPI-IO writes
 *              go straight from the field, no packing)
 *   global     rank 0's whole-grid array (gather-to-root, per-rank-then-gather)
 *   packed     the rank's block packed (per-rank-then-gather's part file)
 *   blocks[r]  where rank r's block lies in the global array (rank 0 receives
 *              every block in place)
 */
static MPI_Datatype interior = MPI_DATATYPE_NULL, *blocks;
static double *global, *packed;
static MPI_Info io_info = MPI_INFO_NULL;

static void output_setup(enum strategy s)
{
    int full[3] = {lsize[0] + 2, lsize[1] + 2, lsize[2] + 2}, one[3] = {1, 1, 1};
    size_t lcount = (size_t)lsize[0] * lsize[1] * lsize[2];
    size_t gcount = (size_t)gsize[0] * gsize[1] * gsize[2];
    MPI_Type_create_subarray(3, full, lsize, one, MPI_ORDER_C, MPI_DOUBLE, &interior);
    MPI_Type_commit(&interior);
    if (s == S_PERRANK) {
        packed = malloc(lcount * sizeof(double) + 1);
        if (!packed)
            die("out of memory (pack buffer)");
        memset(packed, 0, lcount * sizeof(double));
    }
    if ((s == S_GATHER || s == S_PERRANK) && rank == 0) {
        global = malloc(gcount * sizeof(double) + 1);
        blocks = malloc(nranks * sizeof(MPI_Datatype));
        if (!global || !blocks)
            die("out of memory (global array on rank 0)");
        memset(global, 0, gcount * sizeof(double));
        for (int r = 0; r < nranks; r++) {
            int st[3], sz[3];
            block_of(r, st, sz);
            MPI_Type_create_subarray(3, gsize, sz, st, MPI_ORDER_C, MPI_DOUBLE, &blocks[r]);
            MPI_Type_commit(&blocks[r]);
        }
    }
}

static void output_teardown(void)
{
    if (interior != MPI_DATATYPE_NULL)
        MPI_Type_free(&interior);
    if (blocks)
        for (int r = 0; r < nranks; r++)
            MPI_Type_free(&blocks[r]);
    free(blocks);
    free(global);
    free(packed);
    if (io_info != MPI_INFO_NULL)
        MPI_Info_free(&io_info);
}

/* rank 0: every rank's block into `global`, in place (own block copied locally) */
static void gather_blocks(const double *u)
{
    if (rank == 0) {
        MPI_Request *req = malloc(nranks * sizeof(MPI_Request));
        if (!req)
            die("out of memory (requests)");
        req[0] = MPI_REQUEST_NULL;
        for (int r = 1; r < nranks; r++)
            MPI_Irecv(global, 1, blocks[r], r, 100, cart, &req[r]);
        MPI_Sendrecv(u, 1, interior, 0, 101, global, 1, blocks[0], 0, 101, MPI_COMM_SELF,
                     MPI_STATUS_IGNORE);
        MPI_Waitall(nranks, req, MPI_STATUSES_IGNORE);
        free(req);
    } else {
        MPI_Send(u, 1, interior, 0, 100, cart);
    }
}

/* write one result file; returns 1 on success on every rank, 0 otherwise */
static int output(enum strategy s, const double *u, const char *path, const char *dir,
                  int step)
{
    size_t lcount = (size_t)lsize[0] * lsize[1] * lsize[2];
    size_t gcount = (size_t)gsize[0] * gsize[1] * gsize[2];
    int ok = 1;

    if (s == S_GATHER) {
        gather_blocks(u);
        if (rank == 0 && write_all(path, global, gcount * sizeof(double)) != 0)
            ok = 0;
        MPI_Bcast(&ok, 1, MPI_INT, 0, cart);
    } else if (s == S_PERRANK) {
        char part[4096];
        snprintf(part, sizeof part, "%s/cfdio_step%06d.part%05d", dir, step, rank);
        pack(u, packed);
        if (write_all(part, packed, lcount * sizeof(double)) != 0) {
            ok = 0;
            unlink(part);
        }
        ok = all_ok(ok);
        if (rank == 0 && ok) {
            for (int r = 0; r < nranks && ok; r++) {
                int st[3], sz[3];
                char p[4096];
                block_of(r, st, sz);
                size_t n = (size_t)sz[0] * sz[1] * sz[2];
                double *blk = r == 0 ? packed : malloc(n * sizeof(double) + 1);
                if (!blk)
                    die("out of memory (part buffer)");
                snprintf(p, sizeof p, "%s/cfdio_step%06d.part%05d", dir, step, r);
                if (read_all(p, blk, n * sizeof(double)) != 0)
                    ok = 0;
                else
                    place(global, blk, st, sz);
                if (r != 0)
                    free(blk);
            }
            if (ok && write_all(path, global, gcount * sizeof(double)) != 0)
                ok = 0;
        }
        MPI_Bcast(&ok, 1, MPI_INT, 0, cart);
        unlink(part); /* parts are intermediate: gone once gathered, or on failure */
    } else if (s == S_MPIIO) {
        MPI_File fh;
        MPI_Datatype ftype;
        char err[MPI_MAX_ERROR_STRING];
        int elen, rc;
        MPI_Type_create_subarray(3, gsize, lsize, lstart, MPI_ORDER_C, MPI_DOUBLE, &ftype);
        MPI_Type_commit(&ftype);
        rc = MPI_File_open(cart, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, io_info, &fh);
        if (rc != MPI_SUCCESS) {
            MPI_Error_string(rc, err, &elen);
            fprintf(stderr, "cfdio: rank %d: MPI_File_open of %s failed: %s\n", rank, path,
                    err);
            ok = 0;
        }
        if (all_ok(ok)) {
            MPI_File_set_size(fh, 0);
            MPI_File_set_view(fh, 0, MPI_DOUBLE, ftype, "native", io_info);
            MPI_Status st;
            rc = MPI_File_write_at_all(fh, 0, u, 1, interior, &st);
            int cnt = 0;
            if (rc == MPI_SUCCESS)
                MPI_Get_count(&st, MPI_DOUBLE, &cnt);
            if (rc != MPI_SUCCESS || (size_t)cnt != lcount) {
                if (rc != MPI_SUCCESS)
                    MPI_Error_string(rc, err, &elen);
                else
                    snprintf(err, sizeof err, "short write (%d of %zu elements)", cnt, lcount);
                fprintf(stderr, "cfdio: rank %d: MPI_File_write_at_all to %s failed: %s\n",
                        rank, path, err);
                ok = 0;
            }
            rc = MPI_File_sync(fh);
            if (rc != MPI_SUCCESS && ok) {
                MPI_Error_string(rc, err, &elen);
                fprintf(stderr, "cfdio: rank %d: MPI_File_sync of %s failed: %s\n", rank, path,
                        err);
                ok = 0;
            }
            rc = MPI_File_close(&fh);
            if (rc != MPI_SUCCESS && ok) {
                MPI_Error_string(rc, err, &elen);
                fprintf(stderr, "cfdio: rank %d: MPI_File_close of %s failed: %s\n", rank,
                        path, err);
                ok = 0;
            }
            ok = all_ok(ok);
        } else {
            ok = 0;
            if (rc == MPI_SUCCESS)
                MPI_File_close(&fh);
        }
        MPI_Type_free(&ftype);
    }
    if (!ok && rank == 0)
        unlink(path);
    MPI_Barrier(cart);
    return ok;
}

/* rank 0 reads the file back: size and checksum must match the field's */
static int verify(const char *path, uint64_t expect)
{
    int ok = 1;
    if (rank == 0) {
        size_t gcount = (size_t)gsize[0] * gsize[1] * gsize[2];
        struct stat sb;
        if (stat(path, &sb) != 0 || (size_t)sb.st_size != gcount * sizeof(double)) {
            fprintf(stderr, "cfdio: verify: %s has size %lld, expected %zu\n", path,
                    (long long)sb.st_size, gcount * sizeof(double));
            ok = 0;
        } else {
            FILE *f = fopen(path, "rb");
            double chunk[4096];
            uint64_t s = 0, g = 0;
            size_t n;
            while (f && (n = fread(chunk, sizeof(double), 4096, f)) > 0)
                for (size_t i = 0; i < n; i++, g++)
                    s += elem_sum(chunk[i], g);
            if (f)
                fclose(f);
            if (!f || s != expect || g != gcount) {
                fprintf(stderr, "cfdio: verify: checksum of %s is %016" PRIx64
                        ", field has %016" PRIx64 "\n", path, s, expect);
                ok = 0;
            }
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, cart);
    return ok;
}

static void halo(double *u, MPI_Datatype face[3])
{
    for (int d = 0; d < 3; d++) {
        int lo, hi;
        MPI_Cart_shift(cart, d, 1, &lo, &hi);
        int s_lo[3] = {0, 0, 0}, s_hi[3] = {0, 0, 0}, r_lo[3] = {0, 0, 0}, r_hi[3] = {0, 0, 0};
        s_lo[d] = 1;
        s_hi[d] = lsize[d];
        r_lo[d] = 0;
        r_hi[d] = lsize[d] + 1;
        /* faces span the whole padded extent in other dimensions from index 0 */
        MPI_Sendrecv(u + IDX(s_hi[0], s_hi[1], s_hi[2]), 1, face[d], hi, d,
                     u + IDX(r_lo[0], r_lo[1], r_lo[2]), 1, face[d], lo, d, cart,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + IDX(s_lo[0], s_lo[1], s_lo[2]), 1, face[d], lo, d + 3,
                     u + IDX(r_hi[0], r_hi[1], r_hi[2]), 1, face[d], hi, d + 3, cart,
                     MPI_STATUS_IGNORE);
    }
}

/*
 * One sweep, i outer, k innermost and contiguous. Three (j,k) planes of a 256 x 128
 * local block are ~0.8 MiB and stay in a 1 MiB L2 while i advances, so u is read
 * from memory once per sweep; blocking over j measured slower (shorter inner runs).
 */
static void sweep(const double *restrict u, double *restrict v)
{
    const double c0 = 0.4 - 0.1, c1 = 0.1;
    const size_t sj = (size_t)lsize[2] + 2, si = sj * ((size_t)lsize[1] + 2);
    const int nk = lsize[2];
    for (int i = 1; i <= lsize[0]; i++)
        for (int j = 1; j <= lsize[1]; j++) {
            const double *restrict p = u + IDX(i, j, 0);
            double *restrict q = v + IDX(i, j, 0);
            for (int k = 1; k <= nk; k++)
                q[k] = c0 * p[k] + c1 * (p[k - 1] + p[k + 1] + p[k - sj] + p[k + sj] +
                                         p[k - si] + p[k + si]);
        }
}

static double tmax(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* best-of-reps triad bandwidth of all ranks together (MB/s, 3 x 8 B per element) */
static double triad_kernel(long n, int reps, double *best_s, int *valid)
{
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)),
           *c = malloc(n * sizeof(double));
    if (!a || !b || !c)
        die("out of memory (triad arrays)");
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    double best = 1e30, s = 3.0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        double t = tmax(MPI_Wtime() - t0);
        if (t < best)
            best = t;
    }
    double err = 0;
    for (long i = 0; i < n; i++)
        err += a[i] - 7.0;
    int ok = err == 0.0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(a);
    free(b);
    free(c);
    *best_s = best;
    *valid = all;
    return 3.0 * sizeof(double) * (double)n * nranks / best / 1e6;
}

static int run_triad(long n, int reps)
{
    double best;
    int valid;
    double mbs = triad_kernel(n, reps, &best, &valid);
    if (rank == 0)
        printf("CFDIO mode=triad ranks=%d n_per_rank=%ld reps=%d best_s=%.6e bytes=%.0f "
               "triad_MBs=%.1f valid=%d\n",
               nranks, n, reps, best, 3.0 * sizeof(double) * (double)n * nranks, mbs, valid);
    return 0;
}

/* fraction of the file's pages resident in the page cache, -1 if unknown */
static double resident_fraction(int fd, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = (len + (size_t)page - 1) / (size_t)page;
    if (len == 0)
        return 0.0;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -1.0;
    unsigned char *vec = malloc(pages);
    double frac = -1.0;
    if (vec && mincore(m, len, vec) == 0) {
        size_t in = 0;
        for (size_t i = 0; i < pages; i++)
            in += vec[i] & 1;
        frac = (double)in / (double)pages;
    }
    free(vec);
    munmap(m, len);
    return frac;
}

/* the value of element g of a reader's file: position- and reader-dependent */
static double read_value(int r, uint64_t g)
{
    return (double)((g * 2654435761u + (uint64_t)r * 40503u) % 1000003u) * 1e-3;
}

/*
 * Post-processing read: each rank is a reader of its own result file (written
 * and fsynced first, then dropped from the page cache); all read at once.
 */
static int run_read(const char *dir, long read_mb, int keep)
{
    size_t len = (size_t)read_mb << 20, count = len / sizeof(double);
    size_t chunk_n = (size_t)1 << 17; /* 1 MiB of doubles */
    double *buf = malloc(chunk_n * sizeof(double));
    char path[4096];
    int ok = 1;
    if (!buf)
        die("out of memory (read buffer)");
    snprintf(path, sizeof path, "%s/cfdio_read%05d.dat", dir, rank);

    /* write the file in 1 MiB chunks, fsync */
    uint64_t expect = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "cfdio: rank %d: cannot create %s: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        ok = 0;
    }
    for (size_t g0 = 0; ok && g0 < count; g0 += chunk_n) {
        size_t n = count - g0 < chunk_n ? count - g0 : chunk_n;
        for (size_t i = 0; i < n; i++) {
            buf[i] = read_value(rank, g0 + i);
            expect += elem_sum(buf[i], g0 + i);
        }
        const char *p = (const char *)buf;
        size_t left = n * sizeof(double);
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                fprintf(stderr, "cfdio: rank %d: write to %s failed: %s (errno %d)\n", rank,
                        path, strerror(errno), errno);
                ok = 0;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (ok && fsync(fd) != 0) {
        fprintf(stderr, "cfdio: rank %d: fsync of %s failed: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        ok = 0;
    }
    if (fd >= 0 && close(fd) != 0 && ok) {
        fprintf(stderr, "cfdio: rank %d: close of %s failed: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        ok = 0;
    }
    if (!all_ok_world(ok)) {
        unlink(path);
        free(buf);
        if (rank == 0)
            fprintf(stderr, "cfdio: writing the files to read back in %s failed; partial "
                    "files removed\n", dir);
        return 1;
    }

    /* drop the file from the page cache; measure what stayed */
    double resident = -1.0;
    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        resident = resident_fraction(fd, len);
        close(fd);
    }

    /* all readers at once */
    uint64_t got = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "cfdio: rank %d: cannot open %s: %s (errno %d)\n", rank, path,
                strerror(errno), errno);
        ok = 0;
    }
    size_t total = 0;
    while (ok && total < len) {
        size_t want = len - total < chunk_n * sizeof(double) ? len - total
                                                                : chunk_n * sizeof(double);
        ssize_t r = read(fd, buf, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || r % (ssize_t)sizeof(double) != 0) {
            fprintf(stderr, "cfdio: rank %d: read of %s failed: %s\n", rank, path,
                    r == 0 ? "short file" : r < 0 ? strerror(errno) : "partial element");
            ok = 0;
            break;
        }
        size_t g0 = total / sizeof(double);
        for (size_t i = 0; i < (size_t)r / sizeof(double); i++)
            got += elem_sum(buf[i], g0 + i);
        total += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    double t = MPI_Wtime() - t0;
    free(buf);
    if (!keep)
        unlink(path);
    int verified = ok && got == expect;
    if (ok && !verified)
        fprintf(stderr, "cfdio: rank %d: checksum of %s read back is %016" PRIx64
                ", written %016" PRIx64 "\n", rank, path, got, expect);
    int all_verified = all_ok_world(verified);
    if (!all_ok_world(ok))
        return 1;

    double *times = rank == 0 ? malloc(nranks * sizeof(double)) : NULL,
           *res = rank == 0 ? malloc(nranks * sizeof(double)) : NULL;
    MPI_Gather(&t, 1, MPI_DOUBLE, times, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(&resident, 1, MPI_DOUBLE, res, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double tmax_s = 0, mn = 1e300, mx = 0, resmax = 0;
        int unknown = 0;
        for (int r = 0; r < nranks; r++) {
            double bw = (double)len / times[r] / 1e6;
            tmax_s = times[r] > tmax_s ? times[r] : tmax_s;
            mn = bw < mn ? bw : mn;
            mx = bw > mx ? bw : mx;
            unknown |= res[r] < 0;
            resmax = res[r] > resmax ? res[r] : resmax;
        }
        if (unknown) /* mincore not possible (e.g. a FUSE mount without mmap) */
            resmax = -1;
        printf("CFDIO mode=read readers=%d bytes_per_reader=%zu total_s=%.6e "
               "reader_MBs=", nranks, len, tmax_s);
        for (int r = 0; r < nranks; r++)
            printf("%s%.1f", r ? "," : "", (double)len / times[r] / 1e6);
        printf(" min_reader_MBs=%.1f max_reader_MBs=%.1f aggregate_MBs=%.1f "
               "cache_resident=%.3f verified=%d kept=%d\n",
               mn, mx, (double)len * nranks / tmax_s / 1e6, resmax, all_verified, keep);
        fflush(stdout);
    }
    free(times);
    free(res);
    return all_verified ? 0 : 3;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int local[3] = {64, 64, 64}, global[3] = {0, 0, 0}, use_global = 0;
    int steps = 20, every = 10, keep = 0, reps = 10, triad = 0, read_mode = 0, with_triad = 0;
    long triad_n = 20000000L, read_mb = 256;
    enum strategy strat = S_NONE;
    const char *dir = ".";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--local") && i + 3 < argc) {
            for (int d = 0; d < 3; d++)
                local[d] = atoi(argv[++i]);
        } else if (!strcmp(a, "--global") && i + 3 < argc) {
            for (int d = 0; d < 3; d++)
                global[d] = atoi(argv[++i]);
            use_global = 1;
        } else if (!strcmp(a, "--steps") && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (!strcmp(a, "--every") && i + 1 < argc) {
            every = atoi(argv[++i]);
        } else if (!strcmp(a, "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(a, "--keep")) {
            keep = 1;
        } else if (!strcmp(a, "--mpiio-hint") && i + 1 < argc) {
            char kv[256], *eq;
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            if (!(eq = strchr(kv, '='))) {
                usage();
                MPI_Finalize();
                return 2;
            }
            *eq = '\0';
            if (io_info == MPI_INFO_NULL)
                MPI_Info_create(&io_info);
            MPI_Info_set(io_info, kv, eq + 1);
        } else if (!strcmp(a, "--with-triad")) {
            with_triad = 1;
        } else if (!strcmp(a, "--read-mb") && i + 1 < argc) {
            read_mb = atol(argv[++i]);
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(a, "--triad-n") && i + 1 < argc) {
            triad_n = atol(argv[++i]);
        } else if (!strcmp(a, "--mode") && i + 1 < argc) {
            const char *m = argv[++i];
            if (!strcmp(m, "triad"))
                triad = 1;
            else if (!strcmp(m, "read"))
                read_mode = 1;
            else if (strcmp(m, "stencil")) {
                usage();
                MPI_Finalize();
                return 2;
            }
        } else if (!strcmp(a, "--strategy") && i + 1 < argc) {
            const char *s = argv[++i];
            int found = 0;
            for (int k = 0; k < 4; k++)
                if (!strcmp(s, strategy_names[k])) {
                    strat = (enum strategy)k;
                    found = 1;
                }
            if (!found) {
                usage();
                MPI_Finalize();
                return 2;
            }
        } else {
            usage();
            MPI_Finalize();
            return 2;
        }
    }
    if (triad) {
        if (triad_n < 1 || reps < 1)
            die("--triad-n and --reps must be positive");
        run_triad(triad_n, reps);
        MPI_Finalize();
        return 0;
    }
    if (read_mode) {
        if (read_mb < 1)
            die("--read-mb must be positive");
        int rc = run_read(dir, read_mb, keep);
        MPI_Finalize();
        return rc;
    }
    if (steps < 1 || every < 1)
        die("--steps and --every must be positive");

    int periods[3] = {0, 0, 0};
    dims[0] = dims[1] = dims[2] = 0;
    MPI_Dims_create(nranks, 3, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &rank);
    MPI_Cart_coords(cart, rank, 3, coords);
    for (int d = 0; d < 3; d++) {
        gsize[d] = use_global ? global[d] : local[d] * dims[d];
        if (gsize[d] < dims[d] || gsize[d] < 1)
            die("grid smaller than the process grid");
    }
    block_of(rank, lstart, lsize);

    size_t padded = (size_t)(lsize[0] + 2) * (lsize[1] + 2) * (lsize[2] + 2);
    double *u = calloc(padded, sizeof(double)), *v = calloc(padded, sizeof(double));
    if (!u || !v)
        die("out of memory (field)");
    for (int i = 1; i <= lsize[0]; i++)
        for (int j = 1; j <= lsize[1]; j++)
            for (int k = 1; k <= lsize[2]; k++)
                u[IDX(i, j, k)] = 1.0 + 1e-3 * ((lstart[0] + i) % 17) +
                                  1e-4 * ((lstart[1] + j) % 13) + 1e-5 * ((lstart[2] + k) % 11);

    MPI_Datatype face[3];
    for (int d = 0; d < 3; d++) {
        int full[3] = {lsize[0] + 2, lsize[1] + 2, lsize[2] + 2}, sub[3], st[3] = {0, 0, 0};
        for (int e = 0; e < 3; e++)
            sub[e] = full[e];
        sub[d] = 1;
        MPI_Type_create_subarray(3, full, sub, st, MPI_ORDER_C, MPI_DOUBLE, &face[d]);
        MPI_Type_commit(&face[d]);
    }

    if (strat != S_NONE)
        output_setup(strat);

    double t_compute = 0, t_halo = 0, t_out = 0, bytes_written = 0;
    int outputs = 0, verified = 1;
    uint64_t checksum = 0;
    MPI_Barrier(cart);
    double t_start = MPI_Wtime();
    for (int step = 1; step <= steps; step++) {
        double t0 = MPI_Wtime();
        halo(u, face);
        double t1 = MPI_Wtime();
        sweep(u, v);
        double t2 = MPI_Wtime();
        double *tmp = u;
        u = v;
        v = tmp;
        t_halo += t1 - t0;
        t_compute += t2 - t1;
        if (step % every == 0 && strat != S_NONE) {
            char path[4096];
            snprintf(path, sizeof path, "%s/cfdio_step%06d.dat", dir, step);
            MPI_Barrier(cart);
            double o0 = MPI_Wtime();
            int ok = output(strat, u, path, dir, step);
            double o1 = MPI_Wtime();
            t_out += o1 - o0;
            if (!ok) {
                if (rank == 0)
                    fprintf(stderr, "cfdio: output of step %d with strategy %s to %s failed; "
                            "partial files removed\n", step, strategy_names[strat], path);
                MPI_Finalize();
                return 1;
            }
            /* verification is not part of the timed output */
            uint64_t cs = field_checksum(u);
            if (!verify(path, cs))
                verified = 0;
            if (rank == 0 && !keep)
                unlink(path);
            bytes_written += (double)gsize[0] * gsize[1] * gsize[2] * sizeof(double);
            outputs++;
            t_start += MPI_Wtime() - o1; /* exclude verification from the run time */
        }
    }
    double t_total = MPI_Wtime() - t_start;
    checksum = field_checksum(u);
    t_total = tmax(t_total);
    t_compute = tmax(t_compute);
    t_halo = tmax(t_halo);
    t_out = tmax(t_out);
    double points = (double)gsize[0] * gsize[1] * gsize[2];
    /* per sweep: read u (8 B) and write v (8 B) per point, halo reuse from cache */
    double stencil_bytes = 16.0 * points * steps;
    double stencil_mbs = t_compute > 0 ? stencil_bytes / t_compute / 1e6 : 0.0;
    double triad_mbs = 0, triad_best;
    int triad_valid = 1;
    if (with_triad)
        triad_mbs = triad_kernel(triad_n, reps, &triad_best, &triad_valid);
    if (rank == 0) {
        printf("CFDIO mode=stencil strategy=%s ranks=%d dims=%dx%dx%d grid=%dx%dx%d steps=%d "
               "every=%d outputs=%d total_s=%.6e compute_s=%.6e halo_s=%.6e output_s=%.6e "
               "output_share=%.4f bytes_written=%.0f write_MBs=%.1f stencil_MBs=%.1f "
               "checksum=%016" PRIx64 " verified=%d kept=%d",
               strategy_names[strat], nranks, dims[0], dims[1], dims[2], gsize[0], gsize[1],
               gsize[2], steps, every, outputs, t_total, t_compute, t_halo, t_out,
               t_total > 0 ? t_out / t_total : 0.0, bytes_written,
               t_out > 0 ? bytes_written / t_out / 1e6 : 0.0,
               stencil_mbs, checksum, verified, keep);
        if (with_triad)
            printf(" triad_MBs=%.1f stencil_fraction=%.4f valid=%d", triad_mbs,
                   triad_mbs > 0 ? stencil_mbs / triad_mbs : 0.0, triad_valid);
        printf("\n");
        fflush(stdout);
    }
    for (int d = 0; d < 3; d++)
        MPI_Type_free(&face[d]);
    output_teardown();
    free(u);
    free(v);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return verified && triad_valid ? 0 : 3;
}
