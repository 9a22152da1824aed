// ECE agreement (IBTA Enhanced Connection Establishment, as RDMA-CM does
// it): the same vendor and ECE version, and only the features both offer.
#include <gtest/gtest.h>

#include "core/fabric_verbs.h"

namespace smcr {
namespace {

constexpr uint32_t kNvidia = 0x0015b3;

TEST(Ece, IntersectionKeepsVersionAndCommonFeatures) {
  auto a = verbs_ece_agree({kNvidia, 0x10000007}, {kNvidia, 0x10000005});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->vendor_id, kNvidia);
  EXPECT_EQ(a->options, 0x10000005u);
}

TEST(Ece, NoCommonFeatureStillAgreesOnNothing) {
  auto a = verbs_ece_agree({kNvidia, 0x10000001}, {kNvidia, 0x10000002});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->options, 0x10000000u);
}

TEST(Ece, DifferentVendorsOrVersionsDoNotAgree) {
  EXPECT_FALSE(verbs_ece_agree({kNvidia, 0x10000001}, {0x001175, 0x10000001}));
  EXPECT_FALSE(verbs_ece_agree({kNvidia, 0x10000001}, {kNvidia, 0x20000001}));
}

TEST(Ece, AgreementIsSymmetric) {
  VerbsEce a{kNvidia, 0x1000000F}, b{kNvidia, 0x1000003C};
  EXPECT_EQ(verbs_ece_agree(a, b)->options, verbs_ece_agree(b, a)->options);
}

}  // namespace
}  // namespace smcr
