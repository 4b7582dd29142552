// ZmtpMessageMeter: a ZMTP 3 byte stream is followed across any split into reads, and a
// message is refused once its frames together pass the byte or frame limit; commands do
// not count; a peer that does not speak ZMTP 3 is refused. Under CURVE, where a message's end
// is encrypted, what a connection sends between two messages taken is bounded instead.
#include "env/server/zmtp_guard.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace tiergym::env {
namespace {

std::string Greeting(uint8_t major = 3, const std::string& mechanism = "NULL") {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = static_cast<char>(major);
  g.replace(12, mechanism.size(), mechanism);
  return g;
}

std::string Frame(size_t bytes, bool more, bool command = false, bool long_size = false) {
  std::string f(1, static_cast<char>((more ? 1 : 0) | (command ? 4 : 0) |
                                     (long_size || bytes > 255 ? 2 : 0)));
  if (long_size || bytes > 255) {
    for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((bytes >> shift) & 0xff);
  } else {
    f += static_cast<char>(bytes);
  }
  return f + std::string(bytes, 'x');
}

std::string Ready() {
  const std::string body = std::string("\x05READY\x0bSocket-Type\0\0\0\x06", 22) + "DEALER";
  return std::string(1, '\x04') + static_cast<char>(body.size()) + body;
}

bool FeedAll(ZmtpMessageMeter& meter, const std::string& bytes) {
  return meter.Feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

bool FeedByteByByte(ZmtpMessageMeter& meter, const std::string& bytes) {
  bool ok = true;
  for (char c : bytes) ok = meter.Feed(reinterpret_cast<const uint8_t*>(&c), 1) && ok;
  return ok;
}

TEST(ZmtpMessageMeterTest, MessagesWithinTheLimitsPassHoweverTheStreamIsSplit) {
  // Each message: 3 frames, 900 bytes in all (limit 1000); many of them in a row.
  std::string stream = Greeting() + Ready();
  for (int i = 0; i < 50; ++i) {
    stream += Frame(0, true) + Frame(400, true, false, /*long_size=*/true) + Frame(500, false);
    stream += Frame(4, false, /*command=*/true);  // a heartbeat between messages
  }
  ZmtpMessageMeter whole(1000, 4);
  EXPECT_TRUE(FeedAll(whole, stream));
  ZmtpMessageMeter bytewise(1000, 4);
  EXPECT_TRUE(FeedByteByByte(bytewise, stream));
}

TEST(ZmtpMessageMeterTest, AMessageWhosePartsPassTheByteLimitIsRefused) {
  ZmtpMessageMeter meter(1000, 64);
  ASSERT_TRUE(FeedAll(meter, Greeting() + Ready()));
  ASSERT_TRUE(FeedAll(meter, Frame(300, true) + Frame(300, true) + Frame(300, true)));
  EXPECT_FALSE(FeedAll(meter, Frame(300, true)));
  EXPECT_FALSE(FeedAll(meter, Frame(1, false)));  // refused for good
}

TEST(ZmtpMessageMeterTest, TheLimitIsRefusedAtTheFrameHeaderBeforeItsBody) {
  ZmtpMessageMeter meter(1000, 64);
  const std::string big = Frame(5000, false);
  ASSERT_TRUE(FeedAll(meter, Greeting()));
  EXPECT_FALSE(meter.Feed(reinterpret_cast<const uint8_t*>(big.data()), 9));
}

TEST(ZmtpMessageMeterTest, AMessageOfTooManyFramesIsRefusedEvenWhenEmpty) {
  ZmtpMessageMeter meter(1 << 20, 16);
  ASSERT_TRUE(FeedAll(meter, Greeting() + Ready()));
  std::string frames;
  for (int i = 0; i < 16; ++i) frames += Frame(0, true);
  ASSERT_TRUE(FeedAll(meter, frames));
  EXPECT_FALSE(FeedAll(meter, Frame(0, false)));
}

TEST(ZmtpMessageMeterTest, EachMessageStartsTheCountAgain) {
  ZmtpMessageMeter meter(1000, 3);
  ASSERT_TRUE(FeedAll(meter, Greeting()));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(FeedAll(meter, Frame(400, true) + Frame(0, true) + Frame(500, false))) << i;
  }
}

TEST(ZmtpMessageMeterTest, CommandsDoNotCountTowardsAMessage) {
  ZmtpMessageMeter meter(100, 2);
  ASSERT_TRUE(FeedAll(meter, Greeting() + Ready()));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(FeedAll(meter, Frame(90, false, /*command=*/true)));
  EXPECT_TRUE(FeedAll(meter, Frame(60, true) + Frame(40, false)));
}

TEST(ZmtpMessageMeterTest, PeersThatDoNotSpeakZmtp3AreRefused) {
  ZmtpMessageMeter zmtp2(1000, 16);
  EXPECT_FALSE(FeedAll(zmtp2, Greeting(/*major=*/1)));
  ZmtpMessageMeter zmtp1(1000, 16);
  EXPECT_FALSE(FeedAll(zmtp1, std::string("\x05\x00hello", 7)));
  ZmtpMessageMeter http(1000, 16);
  EXPECT_FALSE(FeedAll(http, "GET / HTTP/1.1\r\n\r\n"));
  ZmtpMessageMeter reserved_flags(1000, 16);
  ASSERT_TRUE(FeedAll(reserved_flags, Greeting()));
  EXPECT_FALSE(FeedAll(reserved_flags, std::string("\x08\x00", 2)));
}

// CURVE: every frame is a command on the wire (HELLO, INITIATE, then MESSAGE commands whose
// MORE flag is encrypted). What arrives between two messages the server takes counts, each
// frame with 64 bytes of overhead, up to twice the message limit; taking a message starts
// the count again, so a client whose requests are read never nears the bound.
TEST(ZmtpMessageMeterTest, UnderCurveWhatArrivesBetweenMessagesTakenIsBounded) {
  ZmtpMessageMeter meter(1000, 4);
  ASSERT_TRUE(FeedAll(meter, Greeting(3, "CURVE")));
  EXPECT_TRUE(meter.opaque());
  // 20 messages of 900 bytes, each taken by the server: far past one message's limit in
  // all, and past 4 frames, but never between two messages taken.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(FeedAll(meter, Frame(900, false, /*command=*/true))) << i;
    meter.MessageTaken();
  }
  // Frames that are never taken (a message that does not end): refused past 2 x 1000
  // bytes, counting 64 bytes per frame.
  int frames = 0;
  while (FeedAll(meter, Frame(100, false, /*command=*/true)) && frames < 1000) ++frames;
  EXPECT_EQ(frames, 2000 / (100 + 64));
  meter.MessageTaken();
  EXPECT_FALSE(FeedAll(meter, Frame(1, false, true)));  // refused for good
}

TEST(ZmtpMessageMeterTest, UnderCurveManyTinyFramesCountTheirOverhead) {
  ZmtpMessageMeter meter(1000, 4);
  ASSERT_TRUE(FeedByteByByte(meter, Greeting(3, "CURVE")));
  int frames = 0;
  while (FeedAll(meter, Frame(0, false, true)) && frames < 1000) ++frames;
  EXPECT_EQ(frames, 2000 / 64);
}

TEST(ZmtpMessageMeterTest, TheNullMechanismNeedsNoTellingAndIsNotOpaque) {
  ZmtpMessageMeter meter(1000, 4);
  ASSERT_TRUE(FeedAll(meter, Greeting() + Ready()));
  EXPECT_FALSE(meter.opaque());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(FeedAll(meter, Frame(900, false)));
}

}  // namespace
}  // namespace tiergym::env
