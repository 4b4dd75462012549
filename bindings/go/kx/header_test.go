package kx

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// kx.h functions the Go binding does not offer yet. A function added to kx.h must be bound (called
// through cgo somewhere in this package) or named here; this list only shrinks.
var notBoundYet = map[string]bool{
	"kx_version_number": true, "kx_device_name": true, "kx_device_status": true,
	"kx_strategy_set_tf32": true, "kx_strategy_set_step_graphs": true, "kx_strategy_set_data_streaming": true,
	"kx_strategy_set_cudnn": true, "kx_strategy_create_multi_worker": true, "kx_strategy_num_workers": true,
	"kx_strategy_worker_index": true, "kx_strategy_set_timeout": true, "kx_strategy_create_parameter_server": true,
	"kx_strategy_serve": true, "kx_strategy_set_staleness": true, "kx_model_add_batch_normalization": true,
	"kx_model_get_trainable": true, "kx_model_num_weights": true, "kx_model_weight_info": true,
	"kx_model_weight_offset": true, "kx_model_get_weight": true, "kx_model_set_weight": true,
	"kx_model_summary": true, "kx_model_summary_width": true, "kx_model_loss_scale": true,
	"kx_model_training_memory": true, "kx_dataset_from_arrays_weighted": true, "kx_callbacks_add_csv_logger": true,
	"kx_callbacks_add_terminate_on_nan": true, "kx_callbacks_add_step_decay": true,
	"kx_callbacks_add_cosine_decay": true, "kx_model_train_on_batch": true, "kx_model_test_on_batch": true,
	"kx_evaluate_verbose": true, "kx_reduce_lr_options_init": true,
	"kx_callbacks_add_reduce_lr_on_plateau_options": true, "kx_callbacks_add_learning_rate_scheduler": true,
	"kx_callbacks_add_backup_and_restore_every": true,
	// Deprecated twins: Go binds their successors.
	"kx_callbacks_add_backup_and_restore": true, "kx_callbacks_add_function": true,
	"kx_callbacks_add_reduce_lr_on_plateau": true,
}

// headerFunctions lists the functions kx.h declares (cgo checks each call's signature against it).
func headerFunctions(t *testing.T) []string {
	text, err := os.ReadFile(filepath.Join("..", "..", "..", "capi", "include", "kx", "kx.h"))
	if err != nil {
		t.Fatal(err)
	}
	comments := regexp.MustCompile(`(?s)/\*.*?\*/`)
	decl := regexp.MustCompile(`(?s)KX_API[^;]*?\b(kx_\w+)\s*\(`)
	deprecated := regexp.MustCompile(`KX_DEPRECATED\("[^"]*"\)`)
	clean := deprecated.ReplaceAllString(comments.ReplaceAllString(string(text), " "), " ")
	var names []string
	for _, m := range decl.FindAllStringSubmatch(clean, -1) {
		names = append(names, m[1])
	}
	return names
}

func TestEveryHeaderFunctionIsBoundOrListed(t *testing.T) {
	var sources strings.Builder
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("*.c")
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources.Write(b)
	}
	names := headerFunctions(t)
	if len(names) < 100 {
		t.Fatalf("read only %d functions from kx.h", len(names))
	}
	declared := map[string]bool{}
	var missing []string
	for _, n := range names {
		declared[n] = true
		used := regexp.MustCompile(`\b` + n + `\b`).MatchString(sources.String())
		if !used && !notBoundYet[n] {
			missing = append(missing, n)
		}
		if used && notBoundYet[n] {
			t.Errorf("%s is bound now: take it off notBoundYet", n)
		}
	}
	for n := range notBoundYet {
		if !declared[n] {
			t.Errorf("notBoundYet names %s, which kx.h does not declare", n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("kx.h functions neither bound in Go nor listed in notBoundYet: %v", missing)
	}
}
