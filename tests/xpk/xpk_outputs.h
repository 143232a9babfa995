// Transcripts of `xpk workload list|delete|create` as reference/xpk.md documents them, for
// parser and adapter tests. Tables were rendered with xpk's own algorithm (v1.8+: '{:<w}' cells
// joined by 3 spaces, every cell padded) or kubectl's tabwriter (<= v1.7: minwidth 10, padding
// 3, last column unpadded). Status messages are real Kueue/JobSet strings.
#pragma once

namespace falcon::testing {

// v1.13.1, eight workloads. Expected: train-a RUNNING (QuotaReserved with VMs assigned),
// train-b QUEUED, train-c COMPLETED, train-d FAILED, train-e RUNNING, cpu-job RUNNING (CPU rows
// show 0), train-f QUEUED (evicted), train-g QUEUED (no conditions yet).
// Queued 3, running 3.
inline constexpr const char* kListV113 = R"xpk([XPK] Starting xpk v1.13.1
[XPK] Starting workload list
[XPK] Working on primatrix-tpu and us-central2-b
[XPK] Task: `Find cluster region or zone` is implemented by `gcloud container clusters list --project=primatrix-tpu --filter=name=tpu-v4-cluster --format="value(location)"`
[XPK] Task: `get-credentials-dns-endpoint to cluster tpu-v4-cluster` is implemented by `gcloud container clusters get-credentials tpu-v4-cluster --location=us-central2 --dns-endpoint --project=primatrix-tpu && kubectl config view && kubectl config set-context --current --namespace=default`
[XPK] Task: `get-credentials-dns-endpoint to cluster tpu-v4-cluster` succeeded.
[XPK] Task: `Test kubectl credentials` is implemented by `kubectl get pods`
[XPK] Task: `Test kubectl credentials` succeeded.
[XPK] Finished get-credentials and kubectl setup.
[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is implemented by `kubectl get workloads --ignore-not-found -o=json`
[XPK] Workload List Output:
Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   TPU/GPU VMs Done   Status          Status Message                                                                                                            Status Time         
train-a       2026-06-01T10:00:00Z   medium     4                    4                         <none>             QuotaReserved   Quota reserved in ClusterQueue cluster-queue                                                                              2026-06-01T10:00:02Z
train-b       2026-06-01T10:05:00Z   low        8                    <none>                    <none>             QuotaReserved   couldn't assign flavors to pod set slice-job: insufficient unused quota for google.com/tpu in flavor v5p, 4 more needed   2026-06-01T10:05:01Z
train-c       2026-06-01T09:00:00Z   high       4                    4                         4                  Finished        jobset completed successfully                                                                                             2026-06-01T09:30:00Z
train-d       2026-06-01T09:10:00Z   medium     4                    4                         <none>             Finished        jobset failed due to reaching max number of restarts (first failed job: train-d-slice-job-0)                              2026-06-01T09:40:00Z
train-e       2026-06-01T09:20:00Z   medium     4                    4                         <none>             Admitted        The workload is admitted                                                                                                  2026-06-01T09:20:01Z
cpu-job       2026-06-01T09:25:00Z   medium     0                    0                         <none>             Admitted        The workload is admitted                                                                                                  2026-06-01T09:25:01Z
train-f       2026-06-01T09:26:00Z   medium     4                    <none>                    <none>             Evicted         Preempted to accommodate a workload (UID: 1234) due to prioritization in the ClusterQueue                                 2026-06-01T09:26:30Z
train-g       2026-06-01T09:27:00Z   medium     4                    <none>                    <none>             <none>          <none>                                                                                                                    <none>              
[XPK] See your workloads in Cloud Console: https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=primatrix-tpu
[XPK] Exiting XPK cleanly
)xpk";

// v1.9+ with no workloads: only the header (the golden dry-run transcript of the xpk repo).
inline constexpr const char* kListHeaderOnly = R"xpk([XPK] Starting xpk v0.0.0
[XPK] Starting workload list
[XPK] Working on golden-project and us-central1-a
[XPK] Finished get-credentials and kubectl setup.
[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is implemented by the following command not running since it is a dry run. 
kubectl get workloads --ignore-not-found -o=json
[XPK] Workload List Output:
Jobset Name   Created Time   Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   TPU/GPU VMs Done   Status   Status Message   Status Time
[XPK] See your workloads in Cloud Console: https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=golden-project
[XPK] Exiting XPK cleanly
)xpk";

// <= v1.7 (kubectl custom-columns through awk): `TPU VMs` headers, raw condition types, Kueue
// < 0.7 Finished messages, last column unpadded. Expected: old-a RUNNING, old-b QUEUED, old-c
// COMPLETED, old-d FAILED, old-e UNKNOWN (PodsReady without assigned VMs).
inline constexpr const char* kListV17 = R"xpk([XPK] Starting xpk v0.14.3
[XPK] Starting workload list
[XPK] Working on primatrix-tpu and us-central2-b
[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is implemented by `kubectl get workloads --ignore-not-found -o=custom-columns="Jobset Name:.metadata.ownerReferences[0].name,Created Time:.metadata.creationTimestamp,Priority:.spec.priorityClassName,TPU VMs Needed:.spec.podSets[0].count,TPU VMs Running/Ran:.status.admission.podSetAssignments[-1].count,TPU VMs Done:.status.reclaimablePods[0].count,Status:.status.conditions[-1].type,Status Message:.status.conditions[-1].message,Status Time:.status.conditions[-1].lastTransitionTime"  | awk -e 'NR == 1 || {print $0}'`
[XPK] Workload List Output:
Jobset Name   Created Time           Priority    TPU VMs Needed   TPU VMs Running/Ran   TPU VMs Done   Status          Status Message                                                                                                               Status Time
old-a         2025-03-01T10:00:00Z   medium      2                2                     <none>         Admitted        The workload is admitted                                                                                                     2025-03-01T10:00:01Z
old-b         2025-03-01T10:01:00Z   very-high   4                <none>                <none>         QuotaReserved   couldn't assign flavors to pod set slice-job: insufficient unused quota for google.com/tpu in flavor 2xv4-8, 4 more needed   2025-03-01T10:01:00Z
old-c         2025-03-01T08:00:00Z   low         2                2                     2              Finished        JobSet finished successfully                                                                                                 2025-03-01T09:00:00Z
old-d         2025-03-01T08:30:00Z   low         2                2                     <none>         Finished        JobSet failed                                                                                                                2025-03-01T08:45:00Z
old-e         2025-03-01T08:40:00Z   low         2                <none>                <none>         PodsReady       Not all pods are ready or succeeded                                                                                          2025-03-01T08:41:00Z
[XPK] Exiting XPK cleanly
)xpk";

// <= v1.7 with no workloads: kubectl prints nothing at all, so the marker is followed by an
// empty line.
inline constexpr const char* kListV17Empty = R"xpk([XPK] Starting xpk v0.14.3
[XPK] Starting workload list
[XPK] Workload List Output:

[XPK] Exiting XPK cleanly
)xpk";

// The output ends right after the table (no Console or exit line, e.g. a truncated capture).
inline constexpr const char* kListNothingAfter =
    "[XPK] Workload List Output:\n"
    "Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran"
    "   TPU/GPU VMs Done   Status          Status Message                                 Status "
    "Time         \n"
    "<none>        2026-06-01T10:00:00Z   medium     4                    <none>                 "
    "   <none>             QuotaReserved   Quota reserved in ClusterQueue cluster-queue   "
    "2026-06-01T10:00:02Z";

// CRLF line ends and a `\r` progress line before the list.
inline constexpr const char* kListWithCarriageReturns =
    "[XPK] Starting xpk v1.13.1\r\n"
    "[XPK] Waiting for `Find cluster region or zone`, for 0 seconds...\r"
    "[XPK] Waiting for `Find cluster region or zone`, for 1 seconds...\r"
    "[XPK] Task: `Find cluster region or zone` terminated with code `0`\r\n"
    "[XPK] Workload List Output:\r\n"
    "Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran"
    "   TPU/GPU VMs Done   Status     Status Message             Status Time         \r\n"
    "train-x       2026-06-01T10:00:00Z   medium     4                    4                      "
    "   <none>             Admitted   The workload is admitted   2026-06-01T10:00:01Z\r\n"
    "[XPK] Exiting XPK cleanly\r\n";

// `xpk workload list` failing because kubectl failed (reference §1.3), exit 1.
inline constexpr const char* kListFailureStdout = R"xpk([XPK] Starting xpk v1.13.1
[XPK] Starting workload list
[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is implemented by `kubectl get workloads --ignore-not-found -o=json`
[XPK] Task List Jobs with filter-by-status=EVERYTHING failed with 1
********************************************************************************
[XPK] b'error: the server doesn\'t have a resource type "workloads"\n'
********************************************************************************
[XPK] List Job request returned ERROR 1
[XPK] XPK failed, error code 1
)xpk";

// Deleting a workload that does not exist (reference §3.3): stderr and stdout, exit 1.
inline constexpr const char* kDeleteNotFoundStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Starting Workload delete\n"
    "[XPK] Task: `Delete Workload` is implemented by `kubectl delete jobset ghost -n default`, "
    "streaming output live.\n"
    "[XPK] Waiting for `Delete Workload`, for 0 seconds...\r"
    "[XPK] Task: `Delete Workload` terminated with code `1`\n"
    "[XPK] Delete Workload request returned ERROR 1\n"
    "[XPK] XPK failed, error code 1\n";
inline constexpr const char* kDeleteNotFoundStderr =
    "Error from server (NotFound): jobsets.jobset.x-k8s.io \"ghost\" not found\n";

// A successful delete preceded by the PathwaysJob pre-step, which fails for ordinary JobSet
// workloads and prints an ERROR line and a NotFound about a *pathwaysjob*; exit 0.
inline constexpr const char* kDeleteWithPathwaysStepStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Starting Workload delete\n"
    "[XPK] check_if_pathways_job_is_installed 0 pathways-controller-abc\n"
    "[XPK] Delete Workload request returned ERROR 1\n"
    "jobset.jobset.x-k8s.io \"train-a\" deleted\n"
    "[XPK] Exiting XPK cleanly\n";
inline constexpr const char* kDeleteWithPathwaysStepStderr =
    "Error from server (NotFound): pathwaysjobs.pathways-job.pathways.x-k8s.io \"train-a\" not "
    "found\n";

// A successful create (v1.13.1, TPU).
inline constexpr const char* kCreateOkStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Starting workload create\n"
    "jobset.jobset.x-k8s.io/llama-8b-bench created\n"
    "[XPK] Follow your workload here: "
    "https://console.cloud.google.com/kubernetes/service/us-central2/tpu-v4-cluster/default/"
    "llama-8b-bench/details?project=primatrix-tpu\n"
    "[XPK] Exiting XPK cleanly\n";

// kubectl apply rejected the manifest (version skew, issue #443), exit 1.
inline constexpr const char* kCreateFailStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Starting workload create\n"
    "[XPK] Create Workload request returned ERROR 1\n"
    "[XPK] XPK failed, error code 1\n";
inline constexpr const char* kCreateFailStderr =
    "Error from server (BadRequest): error when creating \"/tmp/tmpab12\": JobSet in version "
    "\"v1alpha2\" cannot be handled as a JobSet: strict decoding error: unknown field "
    "\"spec.ttlSecondsAfterFinished\"\n";

// A create sent to a cluster whose API server does not answer (v1.13.1's flow, reference/xpk.md
// 2.4): the credentials test's failure is ignored, the existence check's kubectl call fails,
// xpk exits before "Starting workload create" and its apply.
inline constexpr const char* kCreateUnreachableStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Creating a new service account: xpk-sa\n"
    "[XPK] Service account: xpk-sa already exists. Skipping its creation\n"
    "[XPK] Task: `Check if Workload Already Exists` is implemented by `kubectl get workloads "
    "-o=custom-columns='Jobset:.metadata.ownerReferences[0].name'`\n"
    "[XPK] Task Check if Workload Already Exists failed with 1\n"
    "[XPK] ********************************************************************************\n"
    "[XPK] b'Unable to connect to the server: dial tcp 10.0.0.7:443: i/o timeout\\n'\n"
    "[XPK] ********************************************************************************\n"
    "[XPK] List Job request returned ERROR 1\n"
    "[XPK] XPK failed, error code 1\n";
// The same cluster dying during the apply: the create step started, the workload may exist.
inline constexpr const char* kCreateApplyUnreachableStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Starting workload create\n"
    "[XPK] Task: `Creating Workload` is implemented by `kubectl apply -f /tmp/tmpab12`, "
    "streaming output live.\n"
    "[XPK] Task: `Creating Workload` terminated with code `1`\n"
    "[XPK] Create Workload request returned ERROR 1\n"
    "[XPK] XPK failed, error code 1\n";
inline constexpr const char* kCreateApplyUnreachableStderr =
    "Unable to connect to the server: net/http: TLS handshake timeout\n";

// A create of a name that exists, stdin at EOF (v1.13.1, reference/xpk.md "Observed with xpk
// 1.13.1"): RBAC "already exists. Skipping" lines first, the prompt last without a newline, an
// EOFError traceback on stderr, exit 1.
inline constexpr const char* kCreateDuplicateStdout =
    "[XPK] Starting xpk v1.13.1\n"
    "[XPK] Creating a new service account: xpk-sa\n"
    "[XPK] Service account: xpk-sa already exists. Skipping its creation\n"
    "[XPK] Attempting to create Role: pod-reader in namespace: default\n"
    "[XPK] Role: pod-reader already exists. Skipping its creation.\n"
    "[XPK] RoleBinding: default-pod-reader-binding already exists. Skipping its creation.\n"
    "[XPK] RoleBinding: xpk-sa-pod-reader-binding already exists. Skipping its creation.\n"
    "[XPK] Task: `Check if Workload Already Exists` is implemented by the following command not "
    "running since it is a dry run. \n"
    "[XPK] llama-8b-bench already exists, do you want to overwrite it? (y/N): ";
inline constexpr const char* kCreateDuplicateStderr =
    "Traceback (most recent call last):\n"
    "  File \"/root/xpk/bin/xpk\", line 8, in <module>\n"
    "    sys.exit(main())\n"
    "  File \"/root/xpk/lib/python3.11/site-packages/xpk/core/commands.py\", line 346, in "
    "ask_for_user_consent\n"
    "    user_input = input(question)\n"
    "EOFError: EOF when reading a line\n";

}  // namespace falcon::testing
