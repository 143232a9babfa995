// fleet-xpk's command line behaves like xpk's argparse parser: accepted spellings, and the
// exact errors (exit 2) for unknown flags, bad names, bad choices and missing arguments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/xpk_args.h"

namespace falcon::fleet {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

XpkParse parse(std::vector<std::string> argv, bool supports_namespace = false) {
  XpkParseOptions options;
  options.supports_namespace = supports_namespace;
  return parse_xpk_args(argv, options);
}

std::string error_of(std::vector<std::string> argv, bool supports_namespace = false) {
  const XpkParse p = parse(std::move(argv), supports_namespace);
  EXPECT_FALSE(p.args.has_value());
  return p.error_text.value_or("<no error>");
}

const std::vector<std::string> kCreate = {
    "workload",       "create", "--cluster=c", "--workload=w", "--command=python3 train.py",
    "--tpu-type=v4-8"};

std::vector<std::string> create_with(std::vector<std::string> extra) {
  std::vector<std::string> argv = kCreate;
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(XpkArgs, AcceptsEqualsAndSpaceFormsAndRepeatedEnv) {
  const XpkParse p = parse({"workload",
                            "create",
                            "--cluster",
                            "c",
                            "--workload=train-1",
                            "--command",
                            "bash -c 'echo hi'",
                            "--device-type",
                            "h100-80gb-8",
                            "--env",
                            "A=1",
                            "--env=B=two=2",
                            "--priority=high",
                            "--num-slices",
                            "2",
                            "--docker-image=gcr.io/p/i:1",
                            "--project=proj",
                            "--zone",
                            "us-central2-b",
                            "--quiet",
                            "--skip-validation",
                            "--max-restarts=3",
                            "-tgps=10",
                            "--ttl-seconds-after-finished",
                            "60"});
  ASSERT_TRUE(p.args) << p.error_text.value_or("");
  const XpkArgs& a = *p.args;
  EXPECT_EQ(a.command, XpkCommand::kWorkloadCreate);
  EXPECT_EQ(a.cluster, "c");
  EXPECT_EQ(a.workload, "train-1");
  EXPECT_EQ(a.command_text, "bash -c 'echo hi'");
  EXPECT_EQ(a.device_type, "h100-80gb-8");
  EXPECT_FALSE(a.tpu_type);
  EXPECT_EQ(a.env, (std::vector<std::string>{"A=1", "B=two=2"}));
  EXPECT_EQ(a.priority, "high");
  EXPECT_EQ(a.num_slices, 2);
  EXPECT_EQ(a.docker_image, "gcr.io/p/i:1");
  EXPECT_EQ(a.project, "proj");
  EXPECT_EQ(a.zone, "us-central2-b");
  EXPECT_TRUE(a.quiet);
  EXPECT_TRUE(a.skip_validation);
  EXPECT_EQ(a.max_restarts, "3");
  EXPECT_EQ(a.ttl_seconds_after_finished, 60);
}

TEST(XpkArgs, ParsesListAndDeleteFlags) {
  const XpkParse list = parse({"workload", "list", "--cluster=c", "--filter-by-status=RUNNING",
                               "--filter-by-job", "train", "--no-quiet", "--timeout=30",
                               "--wait-for-job-completion=w", "--sandbox-kubeconfig"});
  ASSERT_TRUE(list.args) << list.error_text.value_or("");
  EXPECT_EQ(list.args->command, XpkCommand::kWorkloadList);
  EXPECT_EQ(list.args->filter_by_status, "RUNNING");
  EXPECT_EQ(list.args->filter_by_job, "train");
  EXPECT_FALSE(list.args->quiet);
  EXPECT_EQ(list.args->timeout, 30);
  EXPECT_EQ(list.args->wait_for_job_completion, "w");
  EXPECT_TRUE(list.args->sandbox_kubeconfig);

  const XpkParse del = parse({"workload", "delete", "--cluster=c", "--workload=w", "--force"});
  ASSERT_TRUE(del.args);
  EXPECT_EQ(del.args->command, XpkCommand::kWorkloadDelete);
  EXPECT_TRUE(del.args->force);
  EXPECT_EQ(del.args->workload, "w");
}

TEST(XpkArgs, UnknownFlagsAreReportedByTheTopLevelParser) {
  const std::string err = error_of(create_with({"--bogus", "value", "--also=1"}));
  EXPECT_THAT(err, StartsWith("usage: xpk [-h] {cluster,workload,"));
  EXPECT_THAT(err, EndsWith("\nxpk: error: unrecognized arguments: --bogus value --also=1\n"));
  EXPECT_THAT(error_of({"workload", "list", "--cluster=c", "stray"}),
              EndsWith("xpk: error: unrecognized arguments: stray\n"));
}

TEST(XpkArgs, NamespaceExistsOnlyWhenTheXpkSupportsIt) {
  EXPECT_THAT(error_of(create_with({"--namespace=team"})),
              EndsWith("xpk: error: unrecognized arguments: --namespace=team\n"));
  EXPECT_THAT(error_of(create_with({"--namespace", "team"})),
              EndsWith("xpk: error: unrecognized arguments: --namespace team\n"));
  const XpkParse p = parse(create_with({"--namespace", "team"}), true);
  ASSERT_TRUE(p.args);
  EXPECT_EQ(p.args->namespace_, "team");
  // Help shows the flag exactly when it exists (the layer's detection reads it).
  EXPECT_THAT(*parse({"workload", "create", "--help"}, true).help_text, HasSubstr("--namespace"));
  EXPECT_THAT(*parse({"workload", "create", "--help"}, false).help_text,
              ::testing::Not(HasSubstr("--namespace")));
}

TEST(XpkArgs, ValidatesNamesLikeXpk) {
  const std::string err = error_of({"workload", "create", "--cluster=c", "--workload=Bad_Name",
                                    "--command=x", "--tpu-type=v4-8"});
  EXPECT_THAT(err, StartsWith("usage: xpk workload create [-h] "));
  EXPECT_THAT(err, EndsWith("xpk workload create: error: argument --workload: Name must be less "
                            "than 40 characters and match the pattern "
                            "`[a-z]([-a-z0-9]*[a-z0-9])?` Name is currently Bad_Name\n"));
  const std::string forty(40, 'a');
  EXPECT_TRUE(parse({"workload", "delete", "--cluster=c", "--workload=" + forty}).args);
  EXPECT_THAT(error_of({"workload", "delete", "--cluster=c", "--workload=" + forty + "a"}),
              HasSubstr("xpk workload delete: error: argument --workload: Name must be less"));
  EXPECT_THAT(error_of({"workload", "list", "--cluster", "-c"}),
              HasSubstr("argument --cluster: expected one argument"));
  EXPECT_THAT(error_of({"workload", "list", "--cluster=c-"}),
              HasSubstr("xpk workload list: error: argument --cluster: Name must be"));
}

TEST(XpkArgs, RejectsBadChoicesAndNumbers) {
  EXPECT_THAT(error_of(create_with({"--priority=urgent"})),
              EndsWith("xpk workload create: error: argument --priority: invalid choice: "
                       "'urgent' (choose from 'very-low', 'low', 'medium', 'high', "
                       "'very-high')\n"));
  EXPECT_THAT(error_of({"workload", "list", "--cluster=c", "--filter-by-status=DONE"}),
              HasSubstr("argument --filter-by-status: invalid choice: 'DONE' (choose from "
                        "'EVERYTHING', 'FINISHED', 'RUNNING', 'QUEUED', 'FAILED', "
                        "'SUCCESSFUL')"));
  EXPECT_THAT(error_of(create_with({"--num-slices=two"})),
              HasSubstr("argument --num-slices: invalid int value: 'two'"));
}

TEST(XpkArgs, EnforcesRequiredAndExclusiveArguments) {
  EXPECT_THAT(error_of({"workload", "create", "--cluster=c", "--tpu-type=v4-8"}),
              EndsWith("xpk workload create: error: the following arguments are required: "
                       "--command, --workload\n"));
  EXPECT_THAT(error_of({"workload", "create", "--cluster=c", "--workload=w", "--command=x"}),
              EndsWith("error: one of the arguments --tpu-type --device-type is required\n"));
  EXPECT_THAT(error_of(create_with({"--device-type=h100-80gb-8"})),
              EndsWith("error: argument --device-type: not allowed with argument --tpu-type\n"));
  EXPECT_THAT(error_of(create_with({"--env-file=f", "--env=A=1"})),
              EndsWith("error: argument --env: not allowed with argument --env-file\n"));
  EXPECT_THAT(error_of({"workload", "list"}),
              EndsWith("xpk workload list: error: the following arguments are required: "
                       "--cluster\n"));
  EXPECT_THAT(error_of(create_with({"--priority"})),
              HasSubstr("argument --priority: expected one argument"));
}

TEST(XpkArgs, HandlesAbbreviationsAndFlagsLikeArgparse) {
  const XpkParse p = parse({"workload", "delete", "--clus=c", "--wor", "w", "--for"});
  ASSERT_TRUE(p.args) << p.error_text.value_or("");
  EXPECT_EQ(p.args->cluster, "c");
  EXPECT_TRUE(p.args->force);
  EXPECT_THAT(error_of({"workload", "list", "--cluster=c", "--filter=x"}),
              HasSubstr("error: ambiguous option: --filter could match --filter-by-status, "
                        "--filter-by-job"));
  EXPECT_THAT(error_of({"workload", "delete", "--cluster=c", "--force=yes"}),
              HasSubstr("argument --force: ignored explicit argument 'yes'"));
  EXPECT_THAT(error_of({"workload", "list", "--cluster=c", "--quiet=1"}),
              HasSubstr("argument --quiet/--no-quiet: ignored explicit argument '1'"));
  // A value with a space is a value even when it starts with '-'.
  const XpkParse spaced = parse(create_with({"--command", "-c 'run it'"}));
  ASSERT_TRUE(spaced.args);
  EXPECT_EQ(spaced.args->command_text, "-c 'run it'");
}

TEST(XpkArgs, DependencyAutoDownloadFlagFollowsTheFeatureFlag) {
  XpkParseOptions options;
  EXPECT_TRUE(
      parse_xpk_args({"workload", "list", "--cluster=c", "--no-dependency-auto-download"}, options)
          .args);
  options.dependency_auto_download_flag = false;
  EXPECT_THAT(
      parse_xpk_args({"workload", "list", "--cluster=c", "--no-dependency-auto-download"}, options)
          .error_text.value_or(""),
      HasSubstr("unrecognized arguments: --no-dependency-auto-download"));
}

TEST(XpkArgs, TopLevelCommandsHelpAndVersion) {
  EXPECT_TRUE(parse({}).help_text);
  EXPECT_TRUE(parse({"--help"}).help_text);
  EXPECT_TRUE(parse({"workload"}).help_text);
  EXPECT_THAT(*parse({"workload", "list", "-h"}).help_text,
              StartsWith("usage: xpk workload list [-h] --cluster CLUSTER"));
  EXPECT_EQ(parse({"version"}).args->command, XpkCommand::kVersion);
  EXPECT_TRUE(parse({"cluster", "create"}).unsupported_text);
  EXPECT_TRUE(parse({"workload", "create-pathways"}).unsupported_text);
  EXPECT_THAT(error_of({"wrkload", "list"}),
              HasSubstr("xpk: error: argument xpk_subcommands: invalid choice: 'wrkload'"));
  EXPECT_THAT(error_of({"workload", "show"}),
              HasSubstr("xpk workload: error: argument xpk_workload_subcommands: invalid choice: "
                        "'show' (choose from 'create', 'create-pathways', 'list', 'delete')"));
}

}  // namespace
}  // namespace falcon::fleet
