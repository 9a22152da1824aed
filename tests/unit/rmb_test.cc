// RMBE Bsize and QP MTU codes: digest 9.7 and 9.8.
#include "core/rmb.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace smcr::rmb {
namespace {

TEST(RmbSize, Digest97Decode) {
  EXPECT_EQ(decode_size(0), 16384u);
  EXPECT_EQ(decode_size(1), 32768u);
  EXPECT_EQ(decode_size(2), 65536u);
  EXPECT_EQ(decode_size(3), 131072u);
  EXPECT_EQ(decode_size(4), 262144u);
  EXPECT_EQ(decode_size(5), 524288u);
}

TEST(RmbSize, Digest97CodesAboveFiveAreFlagged) {
  for (unsigned code = 6; code < 256; ++code) {
    EXPECT_FALSE(decode_size(static_cast<uint8_t>(code))) << code;
  }
}

TEST(RmbSize, Digest97Encode) {
  EXPECT_EQ(encode_size(16 * 1024), 0);
  EXPECT_EQ(encode_size(64 * 1024), 2);
  EXPECT_EQ(encode_size(512 * 1024), 5);
}

TEST(RmbSize, EncodeRoundsUp) {
  EXPECT_EQ(encode_size(0), 0);
  EXPECT_EQ(encode_size(1), 0);
  EXPECT_EQ(encode_size(16 * 1024 + 1), 1);
  EXPECT_EQ(encode_size(65535), 2);
  EXPECT_EQ(encode_size(65537), 3);
  EXPECT_EQ(encode_size(10000), 0);
}

TEST(RmbSize, Digest97EncodeCapsAtTheRfcMaximum) {
  // 1 MiB would be code 6 by the formula, which no RFC peer accepts.
  EXPECT_EQ(encode_size(1024 * 1024), kMaxCode);
  EXPECT_EQ(encode_size(512 * 1024 + 1), kMaxCode);
  EXPECT_EQ(encode_size(0xFFFFFFFF), kMaxCode);
}

TEST(RmbSize, EncodeDecodeAgree) {
  for (uint8_t code = 0; code <= kMaxCode; ++code) {
    auto size = decode_size(code);
    ASSERT_TRUE(size);
    EXPECT_EQ(encode_size(*size), code);
    EXPECT_GE(*size, kMinSize);
    EXPECT_LE(*size, kMaxSize);
  }
}

TEST(RmbMtu, Digest98Codes) {
  EXPECT_EQ(decode_mtu(1), 256u);
  EXPECT_EQ(decode_mtu(2), 512u);
  EXPECT_EQ(decode_mtu(3), 1024u);
  EXPECT_EQ(decode_mtu(4), 2048u);
  EXPECT_EQ(decode_mtu(5), 4096u);
  EXPECT_EQ(encode_mtu(256), 1);
  EXPECT_EQ(encode_mtu(512), 2);
  EXPECT_EQ(encode_mtu(1024), 3);
  EXPECT_EQ(encode_mtu(2048), 4);
  EXPECT_EQ(encode_mtu(4096), 5);
}

TEST(RmbMtu, Digest98ReservedCodes) {
  EXPECT_FALSE(decode_mtu(0));
  for (uint8_t code = 6; code < 16; ++code) EXPECT_FALSE(decode_mtu(code)) << int(code);
}

TEST(RmbMtu, Digest98SmallerOfTheTwo) {
  EXPECT_EQ(encode_mtu(std::min(1024u, 4096u)), 3);
}

TEST(RmbMtu, NonIbSizesRoundDown) {
  EXPECT_FALSE(encode_mtu(0));
  EXPECT_FALSE(encode_mtu(255));
  EXPECT_EQ(encode_mtu(1500), 3);
  EXPECT_EQ(encode_mtu(4095), 4);
  EXPECT_EQ(encode_mtu(9000), 5);
}

}  // namespace
}  // namespace smcr::rmb
