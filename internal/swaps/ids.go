package swaps

import (
	"slices"
)

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

func uniqueSorted(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func hasDuplicates(ids []int64) bool { return len(uniqueSorted(ids)) != len(ids) }
