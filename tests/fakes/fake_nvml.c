/*
 * A fake NVML for gpuyard's tests: built as libnvidia-ml.so.1 and loaded by the real pynvml
 * when the process starts with LD_LIBRARY_PATH pointing at its directory.
 *
 *   gcc -shared -fPIC -O1 -Wall -Wextra -o DIR/libnvidia-ml.so.1 tests/fakes/fake_nvml.c
 *
 * Environment, read at the first successful nvmlInit*:
 *   FAKE_NVML_GPUS  GPUs separated by ';', each "name|uuid|memory_mb" with optional further
 *                   fields "|minor|util_gpu|util_mem|temp_c|power_mw|used_mb"
 *                   (defaults: minor = index, 0 %, 0 %, 40 C, 50000 mW, 0 MB used).
 *                   Unset or empty: no GPUs. Malformed: nvmlInit returns NVML_ERROR_UNKNOWN.
 *   FAKE_NVML_NVLINK  NVLink islands separated by ';', each a ','-separated list of GPU indices
 *                   ("0,1,2,3;4,5,6,7"): nvmlDeviceGetP2PStatus answers NVML_P2P_STATUS_OK
 *                   within an island, NVML_P2P_STATUS_NOT_SUPPORTED otherwise.
 *   FAKE_NVML_PCIE  PCIe switches in the same syntax ("0,1;2,3"): two GPUs under one switch have
 *                   the common ancestor NVML_TOPOLOGY_SINGLE, any other pair NVML_TOPOLOGY_SYSTEM.
 *                   For both: unset or empty, no links; malformed (an empty item, an index that
 *                   is not a GPU, a GPU listed twice): nvmlInit returns NVML_ERROR_UNKNOWN.
 *   FAKE_NVML_FAIL  driver_not_loaded | no_permission | lib_rm_version_mismatch | unknown:
 *                   every nvmlInit* returns that error;
 *                   gpu_is_lost:N: every query of device N returns NVML_ERROR_GPU_IS_LOST;
 *                   topology_not_supported: the two topology queries return NOT_SUPPORTED.
 *   FAKE_NVML_HEALTH_FILE  a file read again at every health query, so that a test can make a
 *                   GPU unhealthy while the process runs; one line per fault, "INDEX KIND [N]":
 *                   "2 xid 79" (an XID critical error event, delivered once by
 *                   nvmlEventSetWait_v2 to a set that registered that GPU), "1 ecc 3" (3
 *                   volatile uncorrectable ECC errors), "0 pending" (retired pages pending),
 *                   "3 lost" (every query of GPU 3 returns NVML_ERROR_GPU_IS_LOST from then on).
 *
 * Signatures follow NVML's nvml.h. Only what gpuyard and pynvml's init path call is here.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum nvmlGpuP2PStatus_enum {
    NVML_P2P_STATUS_OK = 0,
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1,
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
    NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
    NVML_P2P_STATUS_NOT_SUPPORTED = 5,
    NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;

typedef enum nvmlGpuP2PCapsIndex_enum {
    NVML_P2P_CAPS_INDEX_READ = 0,
    NVML_P2P_CAPS_INDEX_WRITE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    NVML_P2P_CAPS_INDEX_PCI = 4,
    NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

#define MAX_GPUS 64
#define TEXT_SIZE 96
#define MIB (1024ULL * 1024ULL)

struct nvmlDevice_st {
    char name[TEXT_SIZE];
    char uuid[TEXT_SIZE];
    unsigned long long memory_mb, used_mb;
    unsigned int minor, util_gpu, util_mem, temp_c, power_mw;
    int lost;
};

static struct nvmlDevice_st devices[MAX_GPUS];
static unsigned int device_count;
static int nvlink_island[MAX_GPUS], pcie_switch[MAX_GPUS]; /* by device index; -1: none */
static int init_count;
static unsigned int xids_delivered; /* XID lines of the health file already delivered */
static int topology_not_supported;

/* ---- configuration ---- */

static int parse_uint(const char *text, unsigned long long *out)
{
    char *end;
    if (text == NULL || *text == '\0')
        return 0;
    *out = strtoull(text, &end, 10);
    return *end == '\0';
}

static int copy_field(char *dst, const char *src)
{
    if (src == NULL || *src == '\0' || strlen(src) >= TEXT_SIZE)
        return 0;
    strcpy(dst, src);
    return 1;
}

/* "name|uuid|memory_mb[|minor|util_gpu|util_mem|temp_c|power_mw|used_mb]" */
static int parse_gpu(char *spec, unsigned int index, struct nvmlDevice_st *d)
{
    unsigned long long numbers[7] = {index, 0, 0, 40, 50000, 0, 0};
    char *name = strsep(&spec, "|");
    char *uuid = strsep(&spec, "|");
    char *memory = strsep(&spec, "|");
    unsigned long long memory_mb;
    int n;

    if (!copy_field(d->name, name) || !copy_field(d->uuid, uuid) || !parse_uint(memory, &memory_mb))
        return 0;
    for (n = 0; spec != NULL; n++)
        if (n >= 6 || !parse_uint(strsep(&spec, "|"), &numbers[n]))
            return 0;
    d->memory_mb = memory_mb;
    d->minor = (unsigned int)numbers[0];
    d->util_gpu = (unsigned int)numbers[1];
    d->util_mem = (unsigned int)numbers[2];
    d->temp_c = (unsigned int)numbers[3];
    d->power_mw = (unsigned int)numbers[4];
    d->used_mb = numbers[5] < memory_mb ? numbers[5] : memory_mb;
    d->lost = 0;
    return 1;
}

static int load_devices(void)
{
    const char *env = getenv("FAKE_NVML_GPUS");
    char *copy, *rest, *spec;
    int ok = 1;

    device_count = 0;
    if (env == NULL || *env == '\0')
        return 1;
    copy = rest = strdup(env);
    if (copy == NULL)
        return 0;
    while (ok && (spec = strsep(&rest, ";")) != NULL) {
        if (*spec == '\0')
            continue;
        ok = device_count < MAX_GPUS && parse_gpu(spec, device_count, &devices[device_count]);
        if (ok)
            device_count++;
    }
    free(copy);
    if (!ok)
        fprintf(stderr, "fake_nvml: bad FAKE_NVML_GPUS entry in \"%s\"\n", env);
    return ok;
}

/* "0,1,2,3;4,5,6,7": group_of[i] = the number of the group listing GPU i, or -1. */
static int load_groups(const char *variable, int *group_of)
{
    const char *env = getenv(variable);
    char *copy, *rest, *group, *item;
    unsigned long long index;
    int ok = 1, number = 0;

    for (index = 0; index < MAX_GPUS; index++)
        group_of[index] = -1;
    if (env == NULL || *env == '\0')
        return 1;
    copy = rest = strdup(env);
    if (copy == NULL)
        return 0;
    while (ok && (group = strsep(&rest, ";")) != NULL) {
        while (ok && (item = strsep(&group, ",")) != NULL) {
            ok = parse_uint(item, &index) && index < device_count && group_of[index] < 0;
            if (ok)
                group_of[index] = number;
        }
        number++;
    }
    free(copy);
    if (!ok)
        fprintf(stderr, "fake_nvml: bad %s \"%s\"\n", variable, env);
    return ok;
}

static int load_topology(void)
{
    return load_groups("FAKE_NVML_NVLINK", nvlink_island)
        && load_groups("FAKE_NVML_PCIE", pcie_switch);
}

static nvmlReturn_t init_failure(void)
{
    const char *fail = getenv("FAKE_NVML_FAIL");
    if (fail == NULL)
        return NVML_SUCCESS;
    if (strcmp(fail, "driver_not_loaded") == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (strcmp(fail, "no_permission") == 0)
        return NVML_ERROR_NO_PERMISSION;
    if (strcmp(fail, "lib_rm_version_mismatch") == 0)
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    if (strcmp(fail, "unknown") == 0)
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

static void mark_failures(void)
{
    const char *fail = getenv("FAKE_NVML_FAIL");
    unsigned long long index;
    if (fail != NULL && strncmp(fail, "gpu_is_lost:", 12) == 0 && parse_uint(fail + 12, &index)
        && index < device_count)
        devices[index].lost = 1;
    topology_not_supported = fail != NULL && strcmp(fail, "topology_not_supported") == 0;
}


/* ---- health faults (FAKE_NVML_HEALTH_FILE) ---- */

#define EVENT_XID_CRITICAL 0x8ULL
#define MAX_EVENT_SETS 16

typedef struct nvmlEventSet_st {
    int registered[MAX_GPUS];
} *nvmlEventSet_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

static struct nvmlEventSet_st event_sets[MAX_EVENT_SETS];
static int event_sets_used;

/* Calls `fn` for each fault line "INDEX KIND [N]" of the health file; stops when it returns 1. */
static void each_fault(int (*fn)(unsigned int index, const char *kind, unsigned long long n,
                                 void *arg), void *arg)
{
    const char *path = getenv("FAKE_NVML_HEALTH_FILE");
    char line[128], kind[32];
    unsigned int index;
    unsigned long long n;
    FILE *f;
    if (path == NULL || (f = fopen(path, "r")) == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        int fields = sscanf(line, "%u %31s %llu", &index, kind, &n);
        if (fields < 2 || index >= device_count)
            continue;
        if (fields < 3)
            n = 0;
        if (fn(index, kind, n, arg))
            break;
    }
    fclose(f);
}

static int mark_lost(unsigned int index, const char *kind, unsigned long long n, void *arg)
{
    (void)n;
    (void)arg;
    if (strcmp(kind, "lost") == 0)
        devices[index].lost = 1;
    return 0;
}

struct fault_query {
    unsigned int index;
    const char *kind;
    unsigned long long value;
};

static int find_fault(unsigned int index, const char *kind, unsigned long long n, void *arg)
{
    struct fault_query *q = arg;
    if (index == q->index && strcmp(kind, q->kind) == 0)
        q->value += n ? n : 1;
    return 0;
}

static unsigned long long fault_value(nvmlDevice_t device, const char *kind)
{
    struct fault_query q = {(unsigned int)(device - devices), kind, 0};
    each_fault(find_fault, &q);
    return q.value;
}

/* ---- helpers ---- */

static nvmlReturn_t check(nvmlDevice_t device, const void *out)
{
    unsigned int i;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    each_fault(mark_lost, NULL);
    for (i = 0; i < device_count; i++)
        if (device == &devices[i])
            return device->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
    return NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src)
{
    if (dst == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

/* ---- init, shutdown, errors, system ---- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    nvmlReturn_t failure = init_failure();
    (void)flags;
    if (failure != NVML_SUCCESS)
        return failure;
    if (init_count == 0) {
        if (!load_devices() || !load_topology())
            return NVML_ERROR_UNKNOWN;
        mark_failures();
    }
    init_count++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return init_count ? copy_out(version, length, "550.54.15") : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return init_count ? copy_out(version, length, "12.550.54.15") : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (cudaDriverVersion == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = 12040;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- devices ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t ret = check(device, index);
    if (ret == NVML_SUCCESS)
        *index = (unsigned int)(device - devices);
    return ret;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    nvmlReturn_t ret = check(device, name);
    return ret == NVML_SUCCESS ? copy_out(name, length, device->name) : ret;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    nvmlReturn_t ret = check(device, uuid);
    return ret == NVML_SUCCESS ? copy_out(uuid, length, device->uuid) : ret;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    nvmlReturn_t ret = check(device, minorNumber);
    if (ret == NVML_SUCCESS)
        *minorNumber = device->minor;
    return ret;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t ret = check(device, memory);
    if (ret == NVML_SUCCESS) {
        memory->total = device->memory_mb * MIB;
        memory->used = device->used_mb * MIB;
        memory->free = memory->total - memory->used;
    }
    return ret;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t ret = check(device, memory);
    if (ret == NVML_SUCCESS) {
        memory->total = device->memory_mb * MIB;
        memory->reserved = 0;
        memory->used = device->used_mb * MIB;
        memory->free = memory->total - memory->used;
    }
    return ret;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    nvmlReturn_t ret = check(device, utilization);
    if (ret == NVML_SUCCESS) {
        utilization->gpu = device->util_gpu;
        utilization->memory = device->util_mem;
    }
    return ret;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    nvmlReturn_t ret = check(device, temp);
    if (ret != NVML_SUCCESS)
        return ret;
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = device->temp_c;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    nvmlReturn_t ret = check(device, power);
    if (ret == NVML_SUCCESS)
        *power = device->power_mw;
    return ret;
}

/* ---- topology ---- */

static nvmlReturn_t check_pair(nvmlDevice_t device1, nvmlDevice_t device2, const void *out)
{
    nvmlReturn_t ret = check(device1, out);
    if (ret == NVML_SUCCESS)
        ret = check(device2, out);
    if (ret == NVML_SUCCESS && topology_not_supported)
        return NVML_ERROR_NOT_SUPPORTED;
    return ret;
}

static int same_group(const int *group_of, nvmlDevice_t device1, nvmlDevice_t device2)
{
    int first = group_of[device1 - devices], second = group_of[device2 - devices];
    return first >= 0 && first == second;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    nvmlReturn_t ret = check_pair(device1, device2, pathInfo);
    if (ret != NVML_SUCCESS)
        return ret;
    if (device1 == device2)
        *pathInfo = NVML_TOPOLOGY_INTERNAL;
    else if (same_group(pcie_switch, device1, device2))
        *pathInfo = NVML_TOPOLOGY_SINGLE;
    else
        *pathInfo = NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
}

/* NVLINK: peers within an NVLink island. Other capabilities: NVLink or a shared PCIe switch. */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus)
{
    nvmlReturn_t ret = check_pair(device1, device2, p2pStatus);
    int linked;
    if (ret != NVML_SUCCESS)
        return ret;
    if (p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        return NVML_ERROR_INVALID_ARGUMENT;
    linked = same_group(nvlink_island, device1, device2);
    if (p2pIndex != NVML_P2P_CAPS_INDEX_NVLINK)
        linked = linked || same_group(pcie_switch, device1, device2);
    *p2pStatus = linked ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* ---- health: ECC, retired pages, XID events ---- */

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *eccCounts)
{
    nvmlReturn_t ret = check(device, eccCounts);
    if (ret != NVML_SUCCESS)
        return ret;
    *eccCounts = (errorType == 1 && counterType == 0) ? fault_value(device, "ecc") : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *isPending)
{
    nvmlReturn_t ret = check(device, isPending);
    if (ret != NVML_SUCCESS)
        return ret;
    *isPending = fault_value(device, "pending") > 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (set == NULL || event_sets_used >= MAX_EVENT_SETS)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = &event_sets[event_sets_used++];
    memset(*set, 0, sizeof **set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    return set == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    nvmlReturn_t ret = check(device, set);
    if (ret != NVML_SUCCESS)
        return ret;
    if (eventTypes & EVENT_XID_CRITICAL)
        set->registered[device - devices] = 1;
    return NVML_SUCCESS;
}

struct next_xid {
    nvmlEventSet_t set;
    unsigned int seen;
    nvmlEventData_t *data;
    int found;
};

static int take_xid(unsigned int index, const char *kind, unsigned long long n, void *arg)
{
    struct next_xid *q = arg;
    if (strcmp(kind, "xid") != 0)
        return 0;
    if (q->seen++ < xids_delivered)
        return 0;
    xids_delivered++;
    if (!q->set->registered[index])
        return 0;
    q->data->device = &devices[index];
    q->data->eventType = EVENT_XID_CRITICAL;
    q->data->eventData = n;
    q->data->gpuInstanceId = q->data->computeInstanceId = 0xFFFFFFFF;
    q->found = 1;
    return 1;
}

/* The next undelivered XID line of a registered GPU, at once; else NVML_ERROR_TIMEOUT (the fake
 * never sleeps: a test's health file is already written when it asks). */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    struct next_xid q = {set, 0, data, 0};
    (void)timeoutms;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (set == NULL || data == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    each_fault(take_xid, &q);
    return q.found ? NVML_SUCCESS : NVML_ERROR_TIMEOUT;
}
