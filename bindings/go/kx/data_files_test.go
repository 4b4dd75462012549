package kx

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCSVFilesAndTheirErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.csv")
	must(t, os.WriteFile(path, []byte("a,label,b\n1,0,2\n3,1,4\n5,0,6\n"), 0o644))
	d, err := DatasetFromCSV(path, "label")
	must(t, err)
	defer d.Close()
	if d.NumSamples() != 3 {
		t.Fatalf("%d samples", d.NumSamples())
	}
	mean, _, err := d.FeatureMoments(2)
	must(t, err)
	if mean[0] != 3 || mean[1] != 4 {
		t.Fatalf("feature means %v, want [3 4]", mean)
	}
	must(t, os.WriteFile(path, []byte("a,label\n1,0\n?,1\n"), 0o644))
	_, err = DatasetFromCSV(path, "label")
	var kerr *Error
	if !errors.As(err, &kerr) || !strings.Contains(err.Error(), "line 3, column 1") {
		t.Fatalf("bad cell: %v", err)
	}
	if _, err := DatasetFromNPY(filepath.Join(dir, "none.npy"), path); err == nil {
		t.Fatal("a missing .npy loaded")
	}
}

func TestAnImageFolderTrainsWithCachePrefetchAndAugmentation(t *testing.T) {
	dir := t.TempDir()
	for label, class := range []string{"b_dogs", "a_cats"} {
		must(t, os.MkdirAll(filepath.Join(dir, class), 0o755))
		for i := 0; i < 8; i++ {
			img := image.NewRGBA(image.Rect(0, 0, 6, 6))
			for p := 0; p < 36; p++ {
				img.Set(p%6, p/6, color.RGBA{uint8(label * 200), uint8(p * 7), uint8(i * 30), 255})
			}
			f, err := os.Create(filepath.Join(dir, class, string(rune('a'+i))+".png"))
			must(t, err)
			must(t, png.Encode(f, img))
			f.Close()
		}
	}
	must(t, os.WriteFile(filepath.Join(dir, "a_cats", "broken.png"), []byte("nope"), 0o644))
	d, err := DatasetFromImageDirectory(dir, 6, 6, 3)
	must(t, err)
	defer d.Close()
	names, err := d.ClassNames()
	must(t, err)
	if len(names) != 2 || names[0] != "a_cats" || names[1] != "b_dogs" || d.NumSkipped() != 1 || d.NumSamples() != 16 {
		t.Fatalf("classes %v, %d skipped, %d samples", names, d.NumSkipped(), d.NumSamples())
	}
	must(t, d.Cache(""))
	must(t, d.Prefetch(2))
	must(t, d.RandomFlip(1))
	must(t, d.RandomCrop(4, 4, 2))
	must(t, d.Batch(4, false))
	s, err := NewMirroredStrategy("cpu")
	must(t, err)
	defer s.Close()
	m, err := NewSequential(s, 4, 4, 3)
	must(t, err)
	defer m.Close()
	must(t, m.AddFlatten())
	must(t, m.AddDense(2, Softmax))
	must(t, m.Compile(CompileOptions{Optimizer: Adam}))
	if _, err := m.Fit(d, FitOptions{Epochs: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.RandomCrop(9, 9, 1); err == nil {
		t.Fatal("a crop larger than the images was accepted")
	}
}
