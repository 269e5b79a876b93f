// XML that crashes hwloc 2.9.0 (Debian 12) inside hwloc_topology_load(), before any
// numabind code runs (fuzz/known-hwloc-crashes/ has one reproducer each; `lstopo --input`
// dies the same way). fuzz_topology_xml skips such inputs so that the fuzzer keeps
// exploring numabind's code instead of stopping on hwloc's defect; topology XML is
// admin-only input (SECURITY.md). The test is on the document as libxml2 parses it
// (attribute names, any whitespace, either quote), never on substrings: an attribute
// named `xcomplete_cpuset` is not `complete_cpuset`. Anything this scanner cannot follow
// counts as a crash too: libxml2 rejects malformed markup before numabind is reached, so
// skipping it loses no coverage of numabind's code.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace nbfuzz {

namespace xmlscan {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Attribute names of the start tag at `pos` (just after its name); false if malformed.
// `pos` ends after the closing '>' (or "/>").
inline bool attribute_names(std::string_view xml, size_t& pos, std::set<std::string>& names) {
    for (;;) {
        while (pos < xml.size() && is_space(xml[pos])) ++pos;
        if (pos >= xml.size()) return false;
        if (xml[pos] == '>') return ++pos, true;
        if (xml[pos] == '/') return pos + 1 < xml.size() && xml[pos + 1] == '>' ? (pos += 2, true) : false;
        const size_t start = pos;
        while (pos < xml.size() && !is_space(xml[pos]) && xml[pos] != '=' && xml[pos] != '>' && xml[pos] != '/') ++pos;
        if (pos == start) return false;
        std::string name(xml.substr(start, pos - start));
        while (pos < xml.size() && is_space(xml[pos])) ++pos;
        if (pos >= xml.size() || xml[pos] != '=') return false;
        ++pos;
        while (pos < xml.size() && is_space(xml[pos])) ++pos;
        if (pos >= xml.size() || (xml[pos] != '"' && xml[pos] != '\'')) return false;
        const size_t close = xml.find(xml[pos], pos + 1);
        if (close == std::string_view::npos) return false;
        pos = close + 1;
        names.insert(std::move(name));
    }
}

}  // namespace xmlscan

// True when hwloc 2.9.0 is known to crash on `xml` (or the scanner cannot tell):
//  - a DOCTYPE without a SYSTEM/PUBLIC identifier: the libxml2 importer reads the DTD's
//    NULL SystemID (`<!DOCTYPE topology><topology/>`, doctype-without-systemid.xml);
//  - an object with cpuset but no complete_cpuset, or nodeset but no complete_nodeset
//    (core-without-complete_cpuset.xml), the root object included
//    (root-without-complete_cpuset.xml); hwloc dereferences the missing set.
inline bool hits_known_hwloc_crash(std::string_view xml) {
    using namespace xmlscan;
    size_t pos = 0;
    while ((pos = xml.find('<', pos)) != std::string_view::npos) {
        std::string_view rest = xml.substr(pos);
        if (rest.substr(0, 4) == "<!--") {
            const size_t end = xml.find("-->", pos + 4);
            if (end == std::string_view::npos) return true;
            pos = end + 3;
        } else if (rest.substr(0, 9) == "<![CDATA[") {
            const size_t end = xml.find("]]>", pos + 9);
            if (end == std::string_view::npos) return true;
            pos = end + 3;
        } else if (rest.substr(0, 2) == "<?") {
            const size_t end = xml.find("?>", pos + 2);
            if (end == std::string_view::npos) return true;
            pos = end + 2;
        } else if (rest.substr(0, 9) == "<!DOCTYPE") {
            // <!DOCTYPE name (SYSTEM "..." | PUBLIC "..." "...")? [internal subset]? >
            size_t p = pos + 9;
            if (p >= xml.size() || !is_space(xml[p])) return true;
            while (p < xml.size() && is_space(xml[p])) ++p;
            while (p < xml.size() && !is_space(xml[p]) && xml[p] != '>' && xml[p] != '[') ++p;
            while (p < xml.size() && is_space(xml[p])) ++p;
            std::string_view id = xml.substr(p, 6);
            if (id != "SYSTEM" && id != "PUBLIC") return true;
            const size_t end = xml.find('>', p);  // an internal subset after an identifier: scanner gives up
            if (end == std::string_view::npos || xml.substr(p, end - p).find('[') != std::string_view::npos) return true;
            pos = end + 1;
        } else if (rest.substr(0, 2) == "<!") {
            return true;  // other declarations have no place in an hwloc XML
        } else if (rest.substr(0, 2) == "</") {
            pos += 2;
        } else {
            size_t p = pos + 1;
            while (p < xml.size() && !is_space(xml[p]) && xml[p] != '>' && xml[p] != '/') ++p;
            std::string_view element = xml.substr(pos + 1, p - pos - 1);
            // hwloc matches the element's local name; a prefix (undeclared namespace) is kept
            // by libxml2 but is cheap to treat the same.
            if (const size_t colon = element.rfind(':'); colon != std::string_view::npos)
                element = element.substr(colon + 1);
            std::set<std::string> names;
            if (!attribute_names(xml, p, names)) return true;
            if (element == "object") {
                if (names.count("cpuset") && !names.count("complete_cpuset")) return true;
                if (names.count("nodeset") && !names.count("complete_nodeset")) return true;
            }
            pos = p;
        }
    }
    return false;
}

}  // namespace nbfuzz
