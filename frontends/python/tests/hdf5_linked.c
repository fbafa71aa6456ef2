/* A C program linked with h5py's own libhdf5 (no HDF5 headers needed: the few declarations
 * it uses, HDF5 1.10+'s 64-bit hid_t), for test_hdf5.py: libhdf5 is loaded before the
 * preloaded tracer starts, its PLT slots lazy. argv: data dir, number of H5Dread calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int64_t hid_t;
typedef int herr_t;
typedef unsigned long long hsize_t;
extern hid_t H5T_NATIVE_DOUBLE_g;
herr_t H5open(void);
hid_t H5Fcreate(const char *, unsigned, hid_t, hid_t);
hid_t H5Fopen(const char *, unsigned, hid_t);
herr_t H5Fclose(hid_t);
hid_t H5Screate_simple(int, const hsize_t *, const hsize_t *);
herr_t H5Sclose(hid_t);
hid_t H5Dcreate2(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
hid_t H5Dopen2(hid_t, const char *, hid_t);
herr_t H5Dwrite(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
herr_t H5Dread(hid_t, hid_t, hid_t, hid_t, hid_t, void *);
herr_t H5Dclose(hid_t);
int main(int argc, char **argv) {
  char p[4096];
  snprintf(p, sizeof p, "%s/c.h5", argv[1]);
  int n = atoi(argv[2]);
  H5open();
  hsize_t dims[1] = {4096};
  double *buf = calloc(4096, sizeof(double));
  hid_t f = H5Fcreate(p, 2 /* H5F_ACC_TRUNC */, 0, 0);
  hid_t s = H5Screate_simple(1, dims, NULL);
  hid_t d = H5Dcreate2(f, "d", H5T_NATIVE_DOUBLE_g, s, 0, 0, 0);
  H5Dwrite(d, H5T_NATIVE_DOUBLE_g, 0, 0, 0, buf);
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
  f = H5Fopen(p, 0, 0);
  d = H5Dopen2(f, "d", 0);
  for (int i = 0; i < n; i++) H5Dread(d, H5T_NATIVE_DOUBLE_g, 0, 0, 0, buf);
  herr_t bad = H5Dread(-5, H5T_NATIVE_DOUBLE_g, 0, 0, 0, buf);
  H5Dclose(d);
  H5Fclose(f);
  printf("ok %d\n", bad);
  return 0;
}
