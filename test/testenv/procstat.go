package testenv

import (
	"os"
	"strconv"
	"strings"
)

// ProcMemory reads a memory field of /proc/<pid>/status (VmRSS, VmHWM, …) in bytes; pid
// "self" is this process. It is 0 where unknown (not Linux, or the process is gone).
func ProcMemory(pid, field string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// OpenFiles is how many file descriptors the process holds (-1 where unknown).
func OpenFiles(pid string) int {
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}
