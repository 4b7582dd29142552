// AccessDecoder on hand-encoded x86-64 instructions: the address each memory operand
// computes from given registers, its read/write action, and what is no data access.
#include "profiler/access_decoder.h"

#include <array>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

// enum perf_event_x86_regs
constexpr size_t kAx = 0, kBx = 1, kCx = 2, kSi = 4, kDi = 5;

class AccessDecoderTest : public ::testing::Test {
 protected:
  AccessDecoderTest() {
    regs_[kAx] = 0x1000;
    regs_[kBx] = 0x20000;
    regs_[kCx] = 3;
    regs_[kSi] = 0x30000;
    regs_[kDi] = 0x40000;
  }
  bool Decode(std::vector<uint8_t> code, DecodedAccess* a, NoAccess* why, uint64_t ip = 0x400000) {
    return decoder_.Decode(code, 0, ip, regs_, a, why);
  }
  AccessDecoder decoder_;
  std::array<uint64_t, 24> regs_{};
};

TEST_F(AccessDecoderTest, ALoadWithBaseIndexScaleAndDisplacement) {
  DecodedAccess a;
  NoAccess why;
  ASSERT_TRUE(Decode({0x48, 0x8b, 0x44, 0xcb, 0x10}, &a, &why));  // mov rax,[rbx+rcx*8+16]
  EXPECT_EQ(a.address, 0x20000u + 3 * 8 + 16);
  EXPECT_EQ(a.kind, AccessKind::kRead);
  EXPECT_EQ(a.size_bytes, 8u);
}

TEST_F(AccessDecoderTest, AStoreAndAReadModifyWrite) {
  DecodedAccess a;
  NoAccess why;
  ASSERT_TRUE(Decode({0x48, 0x89, 0x07}, &a, &why));  // mov [rdi],rax
  EXPECT_EQ(a.address, 0x40000u);
  EXPECT_EQ(a.kind, AccessKind::kWrite);
  ASSERT_TRUE(Decode({0x48, 0x83, 0x00, 0x01}, &a, &why));  // add qword [rax],1
  EXPECT_EQ(a.address, 0x1000u);
  EXPECT_EQ(a.kind, AccessKind::kReadWrite);
}

TEST_F(AccessDecoderTest, RipRelativeVectorAndStringOperands) {
  DecodedAccess a;
  NoAccess why;
  // mov rax,[rip+0x10]: relative to the next instruction (7 bytes on).
  ASSERT_TRUE(Decode({0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00}, &a, &why, 0x400000));
  EXPECT_EQ(a.address, 0x400000u + 7 + 0x10);
  ASSERT_TRUE(Decode({0xc5, 0xfd, 0x6f, 0x06}, &a, &why));  // vmovdqa ymm0,[rsi]
  EXPECT_EQ(a.address, 0x30000u);
  EXPECT_EQ(a.size_bytes, 32u);
  ASSERT_TRUE(Decode({0xf3, 0xa4}, &a, &why));  // rep movsb: the byte read at rsi
  EXPECT_EQ(a.address, 0x30000u);
  EXPECT_EQ(a.kind, AccessKind::kRead);
}

TEST_F(AccessDecoderTest, AddressComputationsNopsStackAndPlainArithmeticAreNoDataAccess) {
  DecodedAccess a;
  NoAccess why;
  EXPECT_FALSE(Decode({0x48, 0x8d, 0x04, 0xcb}, &a, &why));  // lea rax,[rbx+rcx*8]
  EXPECT_EQ(why, NoAccess::kNoMemoryOperand);
  EXPECT_FALSE(Decode({0x0f, 0x1f, 0x40, 0x00}, &a, &why));  // nop dword [rax]
  EXPECT_EQ(why, NoAccess::kNoMemoryOperand);
  EXPECT_FALSE(Decode({0x50}, &a, &why));  // push rax
  EXPECT_EQ(why, NoAccess::kNoMemoryOperand);
  EXPECT_FALSE(Decode({0x48, 0x01, 0xd8}, &a, &why));  // add rax,rbx
  EXPECT_EQ(why, NoAccess::kNoMemoryOperand);
}

TEST_F(AccessDecoderTest, ThreadLocalOperandsAndGarbageAreRefusedWithTheirReason) {
  DecodedAccess a;
  NoAccess why;
  // mov rax,fs:[0x28]: the FS base is not sampled.
  EXPECT_FALSE(Decode({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, &a, &why));
  EXPECT_EQ(why, NoAccess::kUnsupported);
  EXPECT_FALSE(Decode({0x0f, 0xff}, &a, &why));  // no instruction
  EXPECT_EQ(why, NoAccess::kUndecodable);
  EXPECT_FALSE(Decode({}, &a, &why));
  EXPECT_EQ(why, NoAccess::kUndecodable);
  EXPECT_FALSE(Decode({0x48, 0x8b}, &a, &why));  // cut short
  EXPECT_EQ(why, NoAccess::kUndecodable);
}

TEST_F(AccessDecoderTest, ATickAfterALoadIsTheLoadWhenItsAddressRegistersAreIntact) {
  DecodedAccess a;
  NoAccess why;
  // mov rdx,[rdi]; add rdi,0x40 -- the tick at the add (the load has retired).
  const std::vector<uint8_t> code = {0x48, 0x8b, 0x17, 0x48, 0x83, 0xc7, 0x40};
  ASSERT_TRUE(decoder_.Decode(code, 3, 0x400003, regs_, &a, &why));
  EXPECT_EQ(a.address, 0x40000u);
  EXPECT_EQ(a.kind, AccessKind::kRead);
  // mov rax,[rax]; add rbx,rcx -- the load overwrote its own base: not computable, and
  // nothing follows to take its place.
  const std::vector<uint8_t> chase = {0x48, 0x8b, 0x00, 0x48, 0x01, 0xcb};
  EXPECT_FALSE(decoder_.Decode(chase, 3, 0x400003, regs_, &a, &why));
  EXPECT_EQ(why, NoAccess::kUnsupported);
}

TEST_F(AccessDecoderTest, APointerChaseTickIsTheChasesNextNodeAroundTheLoop) {
  DecodedAccess a;
  NoAccess why;
  // loop: mov rax,[rax]; sub edx,1; jne loop -- the tick at the sub, rax the next node.
  const std::vector<uint8_t> loop = {0x48, 0x8b, 0x00, 0x83, 0xea, 0x01, 0x75, 0xf8};
  ASSERT_TRUE(decoder_.Decode(loop, 3, 0x400003, regs_, &a, &why));
  EXPECT_EQ(a.address, 0x1000u);  // rax
  EXPECT_EQ(a.kind, AccessKind::kRead);
  // The same loop but the sub writes the chase's register: no access can be named.
  const std::vector<uint8_t> clobbered = {0x48, 0x8b, 0x00, 0x48, 0x83, 0xe8, 0x01, 0x75, 0xf7};
  EXPECT_FALSE(decoder_.Decode(clobbered, 3, 0x400003, regs_, &a, &why));
}

}  // namespace
}  // namespace tiergym::prof
