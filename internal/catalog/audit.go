package catalog

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// What the audit log records of the catalog's entities (fx_audit.before/after): the terms an
// admin may change, in the API's camelCase, so an operator reads a row as they read the routes.

// instrumentTerms is an instrument's changeable terms, as PutInstruments reads them on the
// locked row and writes them.
type instrumentTerms struct {
	Status      fx.InstrumentStatus `json:"status"`
	LeverageMax int                 `json:"leverageMax"`
	VolumeMin   decimal.Decimal     `json:"volumeMin"`
	VolumeStep  decimal.Decimal     `json:"volumeStep"`
	VolumeMax   decimal.Decimal     `json:"volumeMax"`
	SymbolGroup string              `json:"symbolGroup"`
}

// apply is t with p's non-nil fields.
func (t instrumentTerms) apply(p InstrumentPatch) instrumentTerms {
	if p.Status != nil {
		t.Status = *p.Status
	}
	if p.LeverageMax != nil {
		t.LeverageMax = *p.LeverageMax
	}
	if p.VolumeMin != nil {
		t.VolumeMin = *p.VolumeMin
	}
	if p.VolumeStep != nil {
		t.VolumeStep = *p.VolumeStep
	}
	if p.VolumeMax != nil {
		t.VolumeMax = *p.VolumeMax
	}
	if p.SymbolGroup != nil {
		t.SymbolGroup = *p.SymbolGroup
	}
	return t
}

// settingValue is the audit log's record of one setting; a setting never stored has no record.
type settingValue struct {
	Value string `json:"value"`
}
