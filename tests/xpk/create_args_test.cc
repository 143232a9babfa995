// What falcon refuses to hand to `xpk workload create`: values xpk would paste into the
// workload's YAML unescaped, and pass-through arguments that override falcon's own flags.
#include "workload/create_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace falcon::workload {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DockerImage, AcceptsImageReferences) {
  for (const char* image :
       {"python:3.10", "gcr.io/primatrix/bench:1", "us-docker.pkg.dev/p/r/img@sha256:0123abcdef",
        "localhost:5000/a_b/c-d.e:Tag_1", "a"}) {
    EXPECT_EQ(docker_image_problem(image), std::nullopt) << image;
  }
}

TEST(DockerImage, RefusesWhatWouldChangeTheManifest) {
  for (const char* image : {"img\n    securityContext: {privileged: true}", "img: x", "img #x",
                            "\"img\"", "'img'", "{img}", "[img]", "&anchor", "*alias", "!tag", "|",
                            ">", "%x", "`x`", "-img", ".img", "img\r", "im g", "img\tx"}) {
    const auto problem = docker_image_problem(image);
    ASSERT_TRUE(problem.has_value()) << image;
    EXPECT_THAT(*problem, HasSubstr("is not an image reference")) << image;
  }
  EXPECT_THAT(docker_image_problem("").value_or(""), HasSubstr("docker_image is empty"));
}

TEST(DockerImage, ALongValueIsRefusedAndQuotedOnlyInPart) {
  const std::string image(50'000, 'a');
  const auto problem = docker_image_problem(image);
  ASSERT_TRUE(problem.has_value());
  EXPECT_THAT(*problem, HasSubstr("(50000 bytes) is too long: at most 1024"));
  EXPECT_LT(problem->size(), 200u);
}

TEST(Command, RefusesLineBreaksForEveryDeviceClass) {
  for (bool double_quoted : {false, true}) {
    for (const char* command : {"python3 train.py\n  - name: evil", "a\rb",
                                "a\x0b"
                                "b",
                                "a\x7f"
                                "b",
                                "a\xc2\x85"
                                "b",
                                "a\xe2\x80\xa8"
                                "b",
                                "a\xe2\x80\xa9"
                                "b"}) {
      const auto problem = command_problem(command, double_quoted);
      ASSERT_TRUE(problem.has_value()) << command;
      EXPECT_THAT(*problem, HasSubstr("unescaped into the workload's YAML"));
      EXPECT_THAT(*problem, Not(HasSubstr("\n")));  // quoted with escapes
    }
  }
}

TEST(Command, QuotesAndBackslashesAreRefusedOnlyWhereXpkDoubleQuotesTheCommand) {
  // TPU: a literal block scalar, where " and \ are plain text.
  EXPECT_EQ(command_problem("python3 -c 'print(\"hi\")'", false), std::nullopt);
  EXPECT_EQ(command_problem("echo a\\tb", false), std::nullopt);
  EXPECT_EQ(command_problem("python3 train.py\t--x", false), std::nullopt);
  // GPU and CPU: also `COMMAND: "<command>"`.
  EXPECT_THAT(command_problem("python3 -c 'print(\"hi\")'", true).value_or(""),
              HasSubstr("a double quote"));
  EXPECT_THAT(command_problem("echo 'it'\\''s'", true).value_or(""), HasSubstr("a backslash"));
  EXPECT_EQ(command_problem("python3 train.py --steps=100", true), std::nullopt);
}

TEST(EnvValue, RefusesQuotesBackslashesAndLineBreaks) {
  for (const char* value : {"say \"hi\"", "a\\b", "a\nb", "a\rb", "a\x01", "a\xe2\x80\xa8"}) {
    const auto problem = env_value_problem("KEY", value);
    ASSERT_TRUE(problem.has_value()) << value;
    EXPECT_THAT(*problem, HasSubstr("environment variable 'KEY'"));
  }
  EXPECT_EQ(env_value_problem("KEY", "plain value: with 'single' quotes, #hash and {braces}"),
            std::nullopt);
  EXPECT_EQ(env_value_problem("KEY", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"), std::nullopt);
}

TEST(XpkArgs, PassesThroughWhatFalconDoesNotSet) {
  EXPECT_EQ(
      xpk_args_problem({"--num-slices=2", "--max-restarts", "3", "--scheduler=x", "--no-quiet",
                        "--project-number=1", "--docker-name=main", "--docker-image-pull-secret=s",
                        "-tgps=60", "-cluster", "--", "--skip-validation", "plain"}),
      std::nullopt);
}

TEST(XpkArgs, RefusesFalconsOwnFlagsInEverySpellingArgparseAccepts) {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {{"--cluster=other"}, "--cluster"},
      {{"--cluster", "other"}, "--cluster"},
      {{"--num-slices=2", "--clu=other"}, "--cluster"},
      {{"--wor"}, "--workload"},
      {{"--workload=x"}, "--workload"},
      {{"--project", "p"}, "--project"},
      {{"--zone=us-east1-d"}, "--zone"},
      {{"--region=us-east1"}, "--region"},
      {{"--docker-image=evil"}, "--docker-image"},
      {{"--base-docker-image=x"}, "--base-docker-image"},
      {{"--script-dir=."}, "--script-dir"},
      {{"--command=rm -rf /"}, "--command"},
      {{"--comm", "x"}, "--command"},
      {{"--tpu-type=v5p-8"}, "--tpu-type"},
      {{"--tpu"}, "--tpu-type"},
      {{"--device-type=h100-80gb-8"}, "--device-type"},
      {{"--priority=very-high"}, "--priority"},
      {{"--namespace=kube-system"}, "--namespace"},
      {{"--env=A=b"}, "--env"},
      {{"--env-file=/etc/passwd"}, "--env-file"},
      {{"--quiet"}, "--quiet"},
      {{"--qu"}, "--quiet"},
      {{"--dry-run"}, "--dry-run"},
  };
  for (const auto& c : cases) {
    const auto problem = xpk_args_problem(c.args);
    ASSERT_TRUE(problem.has_value()) << c.args.front();
    EXPECT_THAT(*problem, HasSubstr("would set xpk's " + c.flag)) << c.args.front();
  }
  EXPECT_THAT(xpk_args_problem({"--clu=other"}).value_or(""),
              HasSubstr("'--clu' is a prefix argparse expands to --cluster"));
}

}  // namespace
}  // namespace falcon::workload
