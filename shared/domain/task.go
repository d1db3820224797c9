package domain

// Task is the task field of a command.
type Task string

// The tasks of the README (States and tasks).
const (
	// Signal-only tasks set the state of the same name.
	TaskPending              Task = "Pending"
	TaskNone                 Task = "None"
	TaskCustomerActionNeeded Task = "CustomerActionNeeded"

	// Update tasks start maintenance work.
	TaskEverything          Task = "Everything"
	TaskOperatorUpdate      Task = "OperatorUpdate"
	TaskCertificatesRenewal Task = "CertificatesRenewal"
	TaskSyncClusterObject   Task = "SyncClusterObject"
	TaskMigrateLoadBalancer Task = "MigrateLoadBalancer"

	// Outcomes, sent by whatever performs the update.
	TaskUpdateSucceeded Task = "UpdateSucceeded"
	TaskUpdateFailed    Task = "UpdateFailed"

	// TaskForget (admin) takes the entity out of the signal: its record stays as a tombstone,
	// so that exactly-once holds across it, until a later command tracks it again as new.
	TaskForget Task = "Forget"
	// TaskReschedule moves an announced window (customers' maintenance policies): the entity
	// stays Pending with its stateSince, with the new window.
	TaskReschedule Task = "Reschedule"
)

// TaskKind groups tasks by the column of the transition table they use.
type TaskKind int

// Task kinds.
const (
	KindUnknown TaskKind = iota
	KindSignal
	KindUpdate
	KindOutcome
	// KindAdmin is Forget's: the entity's tracking itself, not its maintenance.
	KindAdmin
	// KindReschedule is Reschedule's alone: not a column of the transition table.
	KindReschedule
)

var taskKinds = map[Task]TaskKind{
	TaskPending:              KindSignal,
	TaskNone:                 KindSignal,
	TaskCustomerActionNeeded: KindSignal,
	TaskEverything:           KindUpdate,
	TaskOperatorUpdate:       KindUpdate,
	TaskCertificatesRenewal:  KindUpdate,
	TaskSyncClusterObject:    KindUpdate,
	TaskMigrateLoadBalancer:  KindUpdate,
	TaskUpdateSucceeded:      KindOutcome,
	TaskUpdateFailed:         KindOutcome,
	TaskForget:               KindAdmin,
	TaskReschedule:           KindReschedule,
}

// Tasks lists the tasks of the transition table in a fixed order; TaskReschedule, which moves a
// window and is judged by the policy in force instead, is the only task outside it.
var Tasks = []Task{
	TaskPending, TaskNone, TaskCustomerActionNeeded,
	TaskEverything, TaskOperatorUpdate, TaskCertificatesRenewal, TaskSyncClusterObject, TaskMigrateLoadBalancer,
	TaskUpdateSucceeded, TaskUpdateFailed, TaskForget,
}

// UpdateTasks lists the tasks that start maintenance work.
var UpdateTasks = []Task{TaskEverything, TaskOperatorUpdate, TaskCertificatesRenewal, TaskSyncClusterObject, TaskMigrateLoadBalancer}

// Kind returns the task's kind; KindUnknown for anything not matched exactly.
func (t Task) Kind() TaskKind { return taskKinds[t] }

// Valid reports whether t is a known task, matched exactly as in ARO-RP.
func (t Task) Valid() bool { return t.Kind() != KindUnknown }
