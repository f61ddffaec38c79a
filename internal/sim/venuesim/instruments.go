package venuesim

// DefaultInstruments are the symbols (desk form) a simulated account offers when
// Config.Instruments is empty: the currency pairs and the metals against the US dollar that an
// OANDA account commonly offers. An order for any other is refused as OANDA refuses an
// instrument it does not know (400 INSTRUMENT_UNKNOWN, nothing created).
var DefaultInstruments = []string{
	"AUDCAD", "AUDCHF", "AUDHKD", "AUDJPY", "AUDNZD", "AUDSGD", "AUDUSD",
	"CADCHF", "CADHKD", "CADJPY", "CADSGD",
	"CHFHKD", "CHFJPY", "CHFZAR",
	"EURAUD", "EURCAD", "EURCHF", "EURCZK", "EURDKK", "EURGBP", "EURHKD", "EURHUF", "EURJPY",
	"EURNOK", "EURNZD", "EURPLN", "EURSEK", "EURSGD", "EURTRY", "EURUSD", "EURZAR",
	"GBPAUD", "GBPCAD", "GBPCHF", "GBPHKD", "GBPJPY", "GBPNZD", "GBPPLN", "GBPSGD", "GBPUSD", "GBPZAR",
	"HKDJPY",
	"NZDCAD", "NZDCHF", "NZDHKD", "NZDJPY", "NZDSGD", "NZDUSD",
	"SGDCHF", "SGDJPY",
	"TRYJPY",
	"USDCAD", "USDCHF", "USDCNH", "USDCZK", "USDDKK", "USDHKD", "USDHUF", "USDJPY", "USDMXN",
	"USDNOK", "USDPLN", "USDSEK", "USDSGD", "USDTHB", "USDTRY", "USDZAR",
	"ZARJPY",
	"XAGUSD", "XAUUSD", "XPDUSD", "XPTUSD",
}
