#ifndef LEDGER_CLIBXML2_SHIM_H
#define LEDGER_CLIBXML2_SHIM_H
/* Debian builds libxml2 with ICU, and its headers then include ICU's, which clash with the
 * copy of ICU inside Foundation. Nothing here touches the ICU-dependent structures (only
 * pointers to them pass through), so hide ICU from the headers. */
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>
#include <libxml/globals.h>

/* libxml2 is not linked: `import` opens it with dlopen (LazyLibrary), so that every other
 * command starts without it and ICU. These are the types of the functions it looks up, taken
 * from libxml2's own declarations (no symbol is referenced). */
typedef __typeof__(&xmlCreatePushParserCtxt) ledger_xmlCreatePushParserCtxt_fn;
typedef __typeof__(&xmlCtxtUseOptions) ledger_xmlCtxtUseOptions_fn;
typedef __typeof__(&xmlParseChunk) ledger_xmlParseChunk_fn;
typedef __typeof__(&xmlCtxtGetLastError) ledger_xmlCtxtGetLastError_fn;
typedef __typeof__(&xmlGetLastError) ledger_xmlGetLastError_fn;
typedef __typeof__(&xmlFreeDoc) ledger_xmlFreeDoc_fn;
typedef __typeof__(&xmlFreeParserCtxt) ledger_xmlFreeParserCtxt_fn;
typedef __typeof__(&xmlSetGenericErrorFunc) ledger_xmlSetGenericErrorFunc_fn;
typedef __typeof__(&xmlStopParser) ledger_xmlStopParser_fn;

/* libxml2 prints parse errors to stderr by default; the importer reports them itself. */
static void ledger_xml_ignore(void *ctx, const char *msg, ...) { (void)ctx; (void)msg; }
static inline void ledger_xml_silence(ledger_xmlSetGenericErrorFunc_fn set) { set(NULL, ledger_xml_ignore); }
/* Silences one push parser's errors (they stay readable through xmlCtxtGetLastError). */
#if LIBXML_VERSION >= 21200
static void ledger_xml_ignore_structured(void *ctx, const xmlError *error) { (void)ctx; (void)error; }
#else
static void ledger_xml_ignore_structured(void *ctx, xmlErrorPtr error) { (void)ctx; (void)error; }
#endif
static inline void ledger_xml_silence_handler(xmlSAXHandler *sax) {
    sax->serror = ledger_xml_ignore_structured;
    sax->error = ledger_xml_ignore;
    sax->warning = ledger_xml_ignore;
    sax->fatalError = ledger_xml_ignore;
}
/* The line the parser is at (the end of the start tag, in a start-element callback). */
static inline int ledger_xml_line(xmlParserCtxtPtr context) {
    return (context != NULL && context->input != NULL) ? context->input->line : 0;
}
#endif
