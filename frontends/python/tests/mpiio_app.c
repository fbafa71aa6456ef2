/* An MPI-IO program for test_mpiio.py, built without mpi.h: Open MPI's ABI declared by hand
 * (its handles are pointers to exported objects), linked with Open MPI's libmpi.so.40.
 * argv: traced dir, untraced dir, elements per rank. Every rank does the same calls on a
 * file in each dir (the test knows them: the ledger is this source). Built as a program, or
 * with -DAPP_MAIN=app_main as a library that Python loads with ctypes (in-process tracing). */
#include <stdio.h>
#include <stdlib.h>
typedef void *MPI_Comm, *MPI_File, *MPI_Info, *MPI_Datatype;
typedef long long MPI_Offset;
extern char ompi_mpi_comm_world[], ompi_mpi_info_null[], ompi_mpi_double[];
#define COMM ((MPI_Comm)ompi_mpi_comm_world)
#define INFO ((MPI_Info)ompi_mpi_info_null)
#define DOUBLE ((MPI_Datatype)ompi_mpi_double)
#define MODE_CREATE 1
#define MODE_RDWR 8
#define SEEK_SET_ 600
int MPI_Init(int *, char ***);
int MPI_Finalize(void);
int MPI_Comm_rank(MPI_Comm, int *);
int MPI_Comm_size(MPI_Comm, int *);
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

static int run(const char *dir, int rank, int size, int n) {
  char p[4096];
  snprintf(p, sizeof p, "%s/m.bin", dir);
  double *w = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) w[i] = rank * n + i;
  MPI_File fh;
  int bad = 0;
  bad |= MPI_File_open(COMM, p, MODE_CREATE | MODE_RDWR, INFO, &fh);
  MPI_Offset mine = (MPI_Offset)rank * n * 8, second = ((MPI_Offset)size * n + rank * n) * 8;
  bad |= MPI_File_write_at_all(fh, mine, w, n, DOUBLE, NULL);
  bad |= MPI_File_seek(fh, second, SEEK_SET_);
  bad |= MPI_File_write(fh, w, n, DOUBLE, NULL);
  bad |= MPI_File_sync(fh);
  bad |= MPI_File_read_at(fh, mine, r, n, DOUBLE, NULL);
  for (int i = 0; i < n; i++) bad |= r[i] != w[i];
  bad |= MPI_File_seek(fh, second, SEEK_SET_);
  bad |= MPI_File_read(fh, r, n / 2, DOUBLE, NULL);
  bad |= MPI_File_seek(fh, mine, SEEK_SET_);
  bad |= MPI_File_read_all(fh, r, n, DOUBLE, NULL);
  bad |= MPI_File_read_at_all(fh, second, r, n, DOUBLE, NULL);
  bad |= MPI_File_set_size(fh, (MPI_Offset)size * n * 16);
  bad |= MPI_File_close(&fh);
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
