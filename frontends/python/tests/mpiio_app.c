/* An MPI-IO program for test_mpiio.py, built without mpi.h (Debian's openmpi-bin and mpich
 * ship no headers): the two ABIs declared by hand. Open MPI's (the default; libmpi.so.40):
 * handles are pointers to exported objects. MPICH's (-DMPICH_ABI; libmpich.so.12): handles
 * are ints with fixed values (its mpi.h), MPI_STATUS_IGNORE is 1, MPI_File a pointer.
 * argv: traced dir, untraced dir, elements per rank. Every rank does the same calls on a
 * file in each dir (the test knows them: the ledger is this source). Built as a program, or
 * with -DAPP_MAIN=app_main as a library that Python loads with ctypes (in-process tracing). */
#include <stdio.h>
#include <stdlib.h>
typedef long long MPI_Offset;
typedef struct ADIOI_FileD *MPI_File;
#ifdef MPICH_ABI
typedef int MPI_Comm, MPI_Info, MPI_Datatype, MPI_Request;
#define COMM ((MPI_Comm)0x44000000)
#define INFO ((MPI_Info)0x1c000000)
#define DOUBLE ((MPI_Datatype)0x4c00080b)
#define STATUS ((void *)1)
#else
typedef void *MPI_Comm, *MPI_Info, *MPI_Datatype, *MPI_Request;
extern char ompi_mpi_comm_world[], ompi_mpi_info_null[], ompi_mpi_double[];
#define COMM ((MPI_Comm)ompi_mpi_comm_world)
#define INFO ((MPI_Info)ompi_mpi_info_null)
#define DOUBLE ((MPI_Datatype)ompi_mpi_double)
#define STATUS ((void *)0)
#endif
#define MODE_CREATE 1
#define MODE_RDWR 8
#define SEEK_SET_ 600
int MPI_Init(int *, char ***);
int MPI_Finalize(void);
int MPI_Barrier(MPI_Comm);
int MPI_Comm_rank(MPI_Comm, int *);
int MPI_Comm_size(MPI_Comm, int *);
int MPI_Wait(MPI_Request *, void *);
int MPI_Type_contiguous(int, MPI_Datatype, MPI_Datatype *);
int MPI_Type_commit(MPI_Datatype *);
int MPI_Type_free(MPI_Datatype *);
int MPI_File_open(MPI_Comm, const char *, int, MPI_Info, MPI_File *);
int MPI_File_close(MPI_File *);
int MPI_File_write_at_all(MPI_File, MPI_Offset, const void *, int, MPI_Datatype, void *);
int MPI_File_write(MPI_File, const void *, int, MPI_Datatype, void *);
int MPI_File_read_at(MPI_File, MPI_Offset, void *, int, MPI_Datatype, void *);
int MPI_File_read(MPI_File, void *, int, MPI_Datatype, void *);
int MPI_File_read_all(MPI_File, void *, int, MPI_Datatype, void *);
int MPI_File_read_at_all(MPI_File, MPI_Offset, void *, int, MPI_Datatype, void *);
int MPI_File_seek(MPI_File, MPI_Offset, int);
int MPI_File_sync(MPI_File);
int MPI_File_set_size(MPI_File, MPI_Offset);
int MPI_File_iwrite_at(MPI_File, MPI_Offset, const void *, int, MPI_Datatype, MPI_Request *);
int MPI_File_iread_at(MPI_File, MPI_Offset, void *, int, MPI_Datatype, MPI_Request *);
int MPI_File_iread_at_all(MPI_File, MPI_Offset, void *, int, MPI_Datatype, MPI_Request *);
int MPI_File_iwrite_all(MPI_File, const void *, int, MPI_Datatype, MPI_Request *);
int MPI_File_iread(MPI_File, void *, int, MPI_Datatype, MPI_Request *);
int MPI_File_set_view(MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info);
int MPI_File_write_ordered(MPI_File, const void *, int, MPI_Datatype, void *);
int MPI_File_read_ordered(MPI_File, void *, int, MPI_Datatype, void *);
int MPI_File_seek_shared(MPI_File, MPI_Offset, int);
int MPI_File_write_shared(MPI_File, const void *, int, MPI_Datatype, void *);
int MPI_File_read_shared(MPI_File, void *, int, MPI_Datatype, void *);
int MPI_File_read_at_all_begin(MPI_File, MPI_Offset, void *, int, MPI_Datatype);
int MPI_File_read_at_all_end(MPI_File, void *, void *);
int MPI_File_write_at_all_begin(MPI_File, MPI_Offset, const void *, int, MPI_Datatype);
int MPI_File_write_at_all_end(MPI_File, const void *, void *);
int MPI_File_read_all_begin(MPI_File, void *, int, MPI_Datatype);
int MPI_File_read_all_end(MPI_File, void *, void *);
int MPI_File_write_ordered_begin(MPI_File, const void *, int, MPI_Datatype);
int MPI_File_write_ordered_end(MPI_File, const void *, void *);

static int same(const double *r, const double *w, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) bad |= r[i] != w[i];
  return bad;
}

static int run(const char *dir, int rank, int size, int n) {
  char p[4096];
  snprintf(p, sizeof p, "%s/m.bin", dir);
  double *w = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) w[i] = rank * n + i;
  MPI_File fh;
  MPI_Request q;
  int bad = 0;
  bad |= MPI_File_open(COMM, p, MODE_CREATE | MODE_RDWR, INFO, &fh);
  /* Three regions of size x n doubles; each rank has the rank-th n of each. */
  MPI_Offset mine = (MPI_Offset)rank * n * 8, second = ((MPI_Offset)size * n + rank * n) * 8,
             third = ((MPI_Offset)2 * size * n + rank * n) * 8;
  bad |= MPI_File_write_at_all(fh, mine, w, n, DOUBLE, STATUS);
  bad |= MPI_File_seek(fh, second, SEEK_SET_);
  bad |= MPI_File_write(fh, w, n, DOUBLE, STATUS);
  bad |= MPI_File_sync(fh);
  bad |= MPI_File_read_at(fh, mine, r, n, DOUBLE, STATUS);
  bad |= same(r, w, n);
  /* A call the MPI refuses (a negative count: MPI_ERR_COUNT, returned: a file's default
   * error handler is MPI_ERRORS_RETURN): recorded with its error and no bytes. */
  bad |= MPI_File_read_at(fh, mine, r, -1, DOUBLE, STATUS) == 0;
  /* Derived types, each freed after use (its handle may come back as the next one, with
   * another size): 2 doubles, then 4, n / 4 of each. */
  for (int k = 2; k <= 4; k += 2) {
    MPI_Datatype t;
    bad |= MPI_Type_contiguous(k, DOUBLE, &t);
    bad |= MPI_Type_commit(&t);
    bad |= MPI_File_read_at(fh, mine, r, n / 4, t, STATUS);
    bad |= MPI_Type_free(&t);
  }
  bad |= MPI_File_seek(fh, second, SEEK_SET_);
  bad |= MPI_File_read(fh, r, n / 2, DOUBLE, STATUS);
  bad |= MPI_File_seek(fh, mine, SEEK_SET_);
  bad |= MPI_File_read_all(fh, r, n, DOUBLE, STATUS);
  bad |= MPI_File_read_at_all(fh, second, r, n, DOUBLE, STATUS);
  /* Nonblocking: each post is an event; its MPI_Wait is not. */
  bad |= MPI_File_iwrite_at(fh, third, w, n, DOUBLE, &q);
  bad |= MPI_Wait(&q, STATUS);
  bad |= MPI_File_sync(fh);
  bad |= MPI_File_iread_at(fh, third, r, n, DOUBLE, &q);
  bad |= MPI_Wait(&q, STATUS);
  bad |= same(r, w, n);
  bad |= MPI_File_iread_at_all(fh, mine, r, n / 4, DOUBLE, &q);
  bad |= MPI_Wait(&q, STATUS);
  bad |= MPI_File_seek(fh, third, SEEK_SET_);
  bad |= MPI_File_iread(fh, r, n, DOUBLE, &q);
  bad |= MPI_Wait(&q, STATUS);
  bad |= same(r, w, n);
  bad |= MPI_File_seek(fh, third, SEEK_SET_);
  bad |= MPI_File_iwrite_all(fh, w, n / 2, DOUBLE, &q);
  bad |= MPI_Wait(&q, STATUS);
  /* Split collectives: a begin and an end each. */
  bad |= MPI_File_read_at_all_begin(fh, mine, r, n, DOUBLE);
  bad |= MPI_File_read_at_all_end(fh, r, STATUS);
  bad |= same(r, w, n);
  bad |= MPI_File_write_at_all_begin(fh, third, w, n, DOUBLE);
  bad |= MPI_File_write_at_all_end(fh, w, STATUS);
  bad |= MPI_File_seek(fh, mine, SEEK_SET_);
  bad |= MPI_File_read_all_begin(fh, r, n / 2, DOUBLE);
  bad |= MPI_File_read_all_end(fh, r, STATUS);
  bad |= same(r, w, n / 2);
  /* A view in doubles (the file pointers start over at 0), then the shared file pointer:
   * ordered calls put rank k's n doubles k-th, where write_at_all put the same values. */
  bad |= MPI_File_set_view(fh, 0, DOUBLE, DOUBLE, "native", INFO);
  bad |= MPI_File_write_ordered(fh, w, n, DOUBLE, STATUS);
  bad |= MPI_File_seek_shared(fh, 0, SEEK_SET_);
  bad |= MPI_File_read_ordered(fh, r, n, DOUBLE, STATUS);
  bad |= same(r, w, n);
  bad |= MPI_File_write_shared(fh, w, n / 4, DOUBLE, STATUS);
  bad |= MPI_Barrier(COMM);
  bad |= MPI_File_read_shared(fh, r, n / 4, DOUBLE, STATUS);
  bad |= MPI_File_write_ordered_begin(fh, w, n / 4, DOUBLE);
  bad |= MPI_File_write_ordered_end(fh, w, STATUS);
  bad |= MPI_File_set_size(fh, (MPI_Offset)size * n * 16);
  bad |= MPI_File_close(&fh);
  free(w);
  free(r);
  return bad;
}

#ifndef APP_MAIN
#define APP_MAIN main
#endif
int APP_MAIN(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(COMM, &rank);
  MPI_Comm_size(COMM, &size);
  int n = atoi(argv[3]);
  int bad = run(argv[1], rank, size, n) | run(argv[2], rank, size, n);
  printf("rank %d %s\n", rank, bad ? "FAILED" : "ok");
  MPI_Finalize();
  return bad;
}
