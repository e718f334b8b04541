//! aarch64 CPU names from the numbers MIDR_EL1 carries: the implementer
//! (`0x41` ARM, `0xc0` Ampere, …) and the part (`0xd08` Cortex-A72, `0xd0c`
//! Neoverse-N1, …), as util-linux `lscpu` and the kernel's `cputype.h` name
//! them.
//!
//! The table lives here rather than in the agent's probe so that both
//! programs read the same one: the agent names the part it probes
//! ([`super::ArmId::part_name`]), and the coordinator names the numbers of
//! any stored snapshot — facts sent by an agent whose table did not know the
//! part yet get their name from a newer coordinator, without a new probe.

use super::ArmId;

/// The implementer's name, as `lscpu` prints it.
pub fn implementer_name(implementer: u32) -> Option<&'static str> {
    IMPLEMENTERS
        .iter()
        .find(|(id, _)| *id == implementer)
        .map(|(_, name)| *name)
}

/// The part's name, for a known implementer and part.
pub fn part_name(implementer: u32, part: u32) -> Option<&'static str> {
    PARTS
        .iter()
        .find(|(i, p, _)| *i == implementer && *p == part)
        .map(|(_, _, name)| *name)
}

impl ArmId {
    /// The part's name: the table's, else what the agent reported.
    pub fn named_part(&self) -> Option<String> {
        self.implementer
            .zip(self.part)
            .and_then(|(i, p)| part_name(i, p))
            .map(str::to_string)
            .or_else(|| self.part_name.clone())
    }

    /// The CPU as a reader names it, with the number beside the name:
    /// `Cortex-A72 (part 0xd08)`, or `part 0xd08` when the table does not know it.
    pub fn model_text(&self) -> Option<String> {
        let number = self.part.map(|p| format!("part {p:#05x}"));
        match (self.named_part(), number) {
            (Some(name), Some(number)) => Some(format!("{name} ({number})")),
            (name, number) => name.or(number),
        }
    }

    /// The implementer with its code: `ARM (0x41)`, or `0x99` when unknown.
    pub fn implementer_text(&self) -> Option<String> {
        let code = self.implementer?;
        Some(match implementer_name(code) {
            Some(name) => format!("{name} ({code:#04x})"),
            None => format!("{code:#04x}"),
        })
    }

    /// Variant and revision as ARM's manuals write them: `r0p3`.
    pub fn revision_text(&self) -> Option<String> {
        Some(format!("r{}p{}", self.variant?, self.revision?))
    }
}

/// (implementer, name).
const IMPLEMENTERS: &[(u32, &str)] = &[
    (0x41, "ARM"),
    (0x42, "Broadcom"),
    (0x43, "Cavium"),
    (0x44, "DEC"),
    (0x46, "FUJITSU"),
    (0x48, "HiSilicon"),
    (0x49, "Infineon"),
    (0x4d, "Motorola/Freescale"),
    (0x4e, "NVIDIA"),
    (0x50, "APM"),
    (0x51, "Qualcomm"),
    (0x53, "Samsung"),
    (0x56, "Marvell"),
    (0x61, "Apple"),
    (0x66, "Faraday"),
    (0x69, "Intel"),
    (0x6d, "Microsoft"),
    (0x70, "Phytium"),
    (0xc0, "Ampere"),
];

/// (implementer, part, name): 64-bit parts first, then the 32-bit Cortex-A
/// cores a 64-bit kernel never reports but a 32-bit agent might.
const PARTS: &[(u32, u32, &str)] = &[
    (0x41, 0xd01, "Cortex-A32"),
    (0x41, 0xd02, "Cortex-A34"),
    (0x41, 0xd03, "Cortex-A53"),
    (0x41, 0xd04, "Cortex-A35"),
    (0x41, 0xd05, "Cortex-A55"),
    (0x41, 0xd06, "Cortex-A65"),
    (0x41, 0xd07, "Cortex-A57"),
    (0x41, 0xd08, "Cortex-A72"),
    (0x41, 0xd09, "Cortex-A73"),
    (0x41, 0xd0a, "Cortex-A75"),
    (0x41, 0xd0b, "Cortex-A76"),
    (0x41, 0xd0c, "Neoverse-N1"),
    (0x41, 0xd0d, "Cortex-A77"),
    (0x41, 0xd0e, "Cortex-A76AE"),
    (0x41, 0xd40, "Neoverse-V1"),
    (0x41, 0xd41, "Cortex-A78"),
    (0x41, 0xd42, "Cortex-A78AE"),
    (0x41, 0xd43, "Cortex-A65AE"),
    (0x41, 0xd44, "Cortex-X1"),
    (0x41, 0xd46, "Cortex-A510"),
    (0x41, 0xd47, "Cortex-A710"),
    (0x41, 0xd48, "Cortex-X2"),
    (0x41, 0xd49, "Neoverse-N2"),
    (0x41, 0xd4a, "Neoverse-E1"),
    (0x41, 0xd4b, "Cortex-A78C"),
    (0x41, 0xd4c, "Cortex-X1C"),
    (0x41, 0xd4d, "Cortex-A715"),
    (0x41, 0xd4e, "Cortex-X3"),
    (0x41, 0xd4f, "Neoverse-V2"),
    (0x41, 0xd80, "Cortex-A520"),
    (0x41, 0xd81, "Cortex-A720"),
    (0x41, 0xd82, "Cortex-X4"),
    (0x41, 0xd84, "Neoverse-V3"),
    (0x41, 0xd85, "Cortex-X925"),
    (0x41, 0xd87, "Cortex-A725"),
    (0x41, 0xd8e, "Neoverse-N3"),
    (0x42, 0x516, "ThunderX2"),
    (0x43, 0x0a0, "ThunderX"),
    (0x43, 0x0a1, "ThunderX-88XX"),
    (0x43, 0x0a2, "ThunderX-81XX"),
    (0x43, 0x0a3, "ThunderX-83XX"),
    (0x43, 0x0af, "ThunderX2-99xx"),
    (0x43, 0x0b8, "ThunderX3-T110"),
    (0x46, 0x001, "A64FX"),
    (0x48, 0xd01, "Kunpeng-920"),
    (0x4e, 0x000, "Denver"),
    (0x4e, 0x003, "Denver 2"),
    (0x4e, 0x004, "Carmel"),
    (0x50, 0x000, "X-Gene"),
    (0x51, 0x800, "Falkor-V1/Kryo"),
    (0x51, 0x801, "Kryo-V2"),
    (0x51, 0x802, "Kryo-3XX-Gold"),
    (0x51, 0x803, "Kryo-3XX-Silver"),
    (0x51, 0x804, "Kryo-4XX-Gold"),
    (0x51, 0x805, "Kryo-4XX-Silver"),
    (0x51, 0xc00, "Falkor"),
    (0x51, 0xc01, "Saphira"),
    (0x53, 0x001, "exynos-m1"),
    (0x61, 0x022, "Icestorm-M1"),
    (0x61, 0x023, "Firestorm-M1"),
    (0x61, 0x024, "Icestorm-M1-Pro"),
    (0x61, 0x025, "Firestorm-M1-Pro"),
    (0x61, 0x028, "Icestorm-M1-Max"),
    (0x61, 0x029, "Firestorm-M1-Max"),
    (0x61, 0x032, "Blizzard-M2"),
    (0x61, 0x033, "Avalanche-M2"),
    (0x6d, 0xd49, "Azure-Cobalt-100"),
    (0x70, 0x662, "FTC662"),
    (0x70, 0x663, "FTC663"),
    (0xc0, 0xac3, "Ampere-1"),
    (0xc0, 0xac4, "Ampere-1a"),
    (0x41, 0xc05, "Cortex-A5"),
    (0x41, 0xc07, "Cortex-A7"),
    (0x41, 0xc08, "Cortex-A8"),
    (0x41, 0xc09, "Cortex-A9"),
    (0x41, 0xc0d, "Cortex-A17"),
    (0x41, 0xc0e, "Cortex-A17"),
    (0x41, 0xc0f, "Cortex-A15"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn id(implementer: Option<u32>, part: Option<u32>, agent_named: Option<&str>) -> ArmId {
        ArmId {
            implementer,
            variant: Some(0),
            architecture: Some(8),
            part,
            revision: Some(3),
            part_name: agent_named.map(str::to_string),
            midr: None,
        }
    }

    #[test]
    fn parts_are_named_with_their_number_beside_them() {
        for (implementer, part, agent_named, model, maker) in [
            (0x41, 0xd08, None, "Cortex-A72 (part 0xd08)", "ARM (0x41)"),
            (0x41, 0xd0c, None, "Neoverse-N1 (part 0xd0c)", "ARM (0x41)"),
            (0x41, 0xd4f, None, "Neoverse-V2 (part 0xd4f)", "ARM (0x41)"),
            (0xc0, 0xac3, None, "Ampere-1 (part 0xac3)", "Ampere (0xc0)"),
            (0x48, 0xd01, None, "Kunpeng-920 (part 0xd01)", "HiSilicon (0x48)"),
            // The same part number means another core at another implementer.
            (0x6d, 0xd49, None, "Azure-Cobalt-100 (part 0xd49)", "Microsoft (0x6d)"),
            // A part the table does not know keeps the agent's name, or only its number.
            (0x41, 0xfff, Some("Future-X9"), "Future-X9 (part 0xfff)", "ARM (0x41)"),
            (0x99, 0x123, None, "part 0x123", "0x99"),
        ] {
            let arm = id(Some(implementer), Some(part), agent_named);
            assert_eq!(arm.model_text().as_deref(), Some(model), "{implementer:#x}/{part:#x}");
            assert_eq!(arm.implementer_text().as_deref(), Some(maker), "{implementer:#x}");
        }
        let arm = id(Some(0x41), Some(0xd08), None);
        assert_eq!(arm.revision_text().as_deref(), Some("r0p3"));
        let unknown = id(None, None, None);
        assert_eq!((unknown.model_text(), unknown.implementer_text()), (None, None));
    }

    #[test]
    fn the_table_names_each_pair_once_and_every_implementer_it_uses() {
        let mut pairs: Vec<(u32, u32)> = PARTS.iter().map(|(i, p, _)| (*i, *p)).collect();
        pairs.sort_unstable();
        let before = pairs.len();
        pairs.dedup();
        assert_eq!(pairs.len(), before, "a part listed twice");
        for (implementer, part, _) in PARTS {
            assert!(
                implementer_name(*implementer).is_some(),
                "{implementer:#x}/{part:#x}: implementer not named"
            );
        }
    }
}
