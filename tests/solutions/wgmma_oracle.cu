// CUTLASS's own answers for the sm_90a prefill's WGMMA data path, printed on the host (no GPU needed):
// the 128-byte-swizzle shared-memory layouts of the Q/K (K-major) and V (MN-major) tiles, the matrix
// descriptors CuTe makes for each warpgroup's k-step slices of them, and the accumulator / register-A
// fragment layouts of wgmma m64nNk16. tests/solutions/test_wgmma_prefill_emulation.py compares them with
// problems/attention/solutions/_templates/flash_prefill_sm90.py. One line per table: "name v0 v1 ...".
#include <cstdio>
#include <initializer_list>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
using namespace cute;
using bf16 = cutlass::bfloat16_t;

alignas(1024) static bf16 smem[256 * 256];

// where each element of a tile lives: through a tensor on a shared-memory pointer, so the swizzle acts on
// byte addresses as the hardware applies it (a swizzled layout evaluated alone swizzles element offsets)
template <class Tile>
void offsets(char const* name, Tile const& tile, int rows, int cols) {
  printf("%s", name);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) printf(" %d", int(&tile(r, c) - smem));
  printf("\n");
}

// start (bytes from the tile), leading and stride byte offsets (16-byte units) and layout type of one slice
template <GMMA::Major M, class Slice>
void descriptor(char const* name, Slice const& slice) {
  GmmaDescriptor d = GMMA::make_gmma_desc<M>(slice);
  printf("%s %d %d %d %d\n", name, int(raw_pointer_cast(slice.data()) - smem) * 2,
         int(d.bitfield.leading_byte_offset_), int(d.bitfield.stride_byte_offset_), int(d.bitfield.layout_type_));
}

// a K-major tile of ROWS x D, cut into k-steps of 16 columns over slices of `slice_rows` rows (Q: a
// warpgroup's 64 rows; K: all of the tile's rows)
template <int ROWS, int D>
void k_major(std::initializer_list<int> slice_heights) {
  auto layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16>{}, Shape<Int<ROWS>, Int<D>>{});
  char name[64];
  snprintf(name, sizeof name, "k_major_%d_%d", ROWS, D);
  Tensor tile = make_tensor(make_smem_ptr(smem), layout);
  offsets(name, tile, ROWS, D);
  for (int slice_rows : slice_heights)
    for (int m = 0; m < ROWS / slice_rows; ++m)
      for (int kk = 0; kk < D / 16; ++kk) {
        snprintf(name, sizeof name, "k_desc_%d_%d_%d_%d_%d", ROWS, D, slice_rows, m, kk);
        if (slice_rows == 64)
          descriptor<GMMA::Major::K>(name, local_tile(tile, Shape<_64, _16>{}, make_coord(m, kk)));
        else
          descriptor<GMMA::Major::K>(name, local_tile(tile, Shape<Int<ROWS>, _16>{}, make_coord(m, kk)));
      }
}

// the V tile as the MN-major B operand: (n = D, k = BN tokens), 64-column panels of all BN tokens each
template <int D, int BN>
void mn_major() {
  auto layout = tile_to_shape(GMMA::Layout_MN_SW128_Atom<bf16>{}, Shape<Int<D>, Int<BN>>{}, Step<_2, _1>{});
  char name[64];
  snprintf(name, sizeof name, "mn_major_%d_%d", D, BN);
  Tensor tile = make_tensor(make_smem_ptr(smem), layout);
  offsets(name, tile, D, BN);
  for (int kk = 0; kk < BN / 16; ++kk) {
    snprintf(name, sizeof name, "mn_desc_%d_%d_%d", D, BN, kk);
    descriptor<GMMA::Major::MN>(name, local_tile(tile, Shape<Int<D>, _16>{}, make_coord(0, kk)));
  }
}

template <class Layout>
void fragment(char const* name, Layout const& layout, int values) {
  printf("%s", name);
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < values; ++v) printf(" %d", int(layout(t, v)));
  printf("\n");
}

int main() {
  k_major<128, 128>({64, 128});  // Q at head dim 128 (warpgroup slices), K at head dim 128 (bn 128)
  k_major<128, 256>({64});  // Q at head dim 256
  k_major<64, 256>({64});  // K at head dim 256 (bn 64)
  mn_major<128, 128>();
  mn_major<256, 64>();
  fragment("c_64x64", GMMA::CLayout_64xN<64>{}, 32);
  fragment("c_64x128", GMMA::CLayout_64xN<128>{}, 64);
  fragment("c_64x256", GMMA::CLayout_64xN<256>{}, 128);
  fragment("a_64x16", GMMA::ALayout_64x16{}, 8);
}
