// The target that builds the test suites' shared precompiled header (tests/CMakeLists.txt,
// TIERGYM_TEST_PCH); every suite reuses it. Nothing else lives here: the executable only
// exists because a precompiled header is built as part of a target.
